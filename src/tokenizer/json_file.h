// Reading a whole file and parsing it as JSON, with errors that name the file.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace inflight::tokenizer {

// NotFound when the file cannot be opened; the message names the path and the reason.
Result<std::string> ReadWholeFile(const std::string& path);

// InvalidArgument naming the path, line and column when the text is not JSON.
Result<nlohmann::json> ReadJsonFile(const std::string& path);

}  // namespace inflight::tokenizer
