// Reading a whole file and parsing it as JSON, with errors that name the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace inflight::tokenizer {

// NotFound when the file cannot be opened; the message names the path and the reason.
Result<std::string> ReadWholeFile(const std::string& path);

// InvalidArgument naming the path, line and column when the text is not JSON.
Result<nlohmann::json> ReadJsonFile(const std::string& path);

// Largest token id a tokenizer file may use: far above real vocabularies (Gemma's 262,144), and
// small enough that the id -> token table (8 bytes an id) stays within 128 MiB.
inline constexpr int32_t kMaxTokenId = (1 << 24) - 1;
inline const char* const kTokenIdRange = "an integer id in 0..16777215";

// A token id as the file wrote it: an integer in [0, kMaxTokenId], checked before narrowing (so
// that 4294967301 is not read as 5); nullopt for anything else.
std::optional<int32_t> JsonTokenId(const nlohmann::json& value);

}  // namespace inflight::tokenizer
