// Loads Triton's ModelConfig from config.pbtxt (protobuf text format) or from the JSON a Triton
// core hands a backend (TRITONBACKEND_ModelConfig), and prints it back as that JSON.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "model_config.pb.h"

namespace inflight::config {

// Parses protobuf text format. Errors name the line and column (1-based) of the first problem.
Result<inference::ModelConfig> ParseModelConfigText(std::string_view pbtxt);

// Reads and parses a config.pbtxt; errors name the path. A template placeholder left unfilled
// where a value is needed (anywhere but a parameter's string_value) is an error naming it and the
// fill_template.py key that sets it (placeholders.h).
Result<inference::ModelConfig> LoadModelConfigFile(const std::string& path);

// Parses the JSON a Triton core produces: proto field names (json_name also accepted), int64 as
// numbers or strings, enums as names or numbers. Unknown fields are ignored, as a newer core may
// send fields this schema does not have yet.
Result<inference::ModelConfig> ParseModelConfigJson(std::string_view json);

// Prints what a Triton core would hand a backend: proto field names, primitive fields always
// printed, 64-bit integers as JSON numbers (protobuf alone prints them as strings).
Result<std::string> ModelConfigToJson(const inference::ModelConfig& config);

}  // namespace inflight::config
