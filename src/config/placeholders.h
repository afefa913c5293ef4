// Template placeholders (${key}) that fill_template.py left in a config.pbtxt, found in the text so
// that a file Triton cannot parse gets an error naming each one and the fill_template.py key that
// sets it, instead of protobuf's "Expected integer or identifier, got: $".
//
// A placeholder in a parameter's string_value is not an error: it means "unset, use the default"
// (parameters.h). Anywhere else it is: in a number, boolean or enum position the file does not
// parse at all; in a string field (backend: "${triton_backend}") it parses but names nothing real.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model_config.pb.h"

namespace inflight::config {

struct PlaceholderUse {
  std::string key;  // the fill_template.py key: "logits_datatype" for ${logits_datatype}
  int line = 0;     // 1-based
  bool in_string = false;
};

// Every ${key} of the text outside comments, in order.
std::vector<PlaceholderUse> FindPlaceholders(std::string_view pbtxt);

// The error for a file whose unquoted placeholders stopped the parse: each key with its lines and
// the value it takes, and the fill_template.py command that sets them. `parse_error` is protobuf's
// message, kept at the end.
Status UnfilledPlaceholdersError(const std::string& path, const std::vector<PlaceholderUse>& uses,
                                 const std::string& parse_error);

// A string field other than a parameter's string_value that is still an unfilled placeholder
// (backend, platform, a step's model_name...): an error naming the field and the key.
Status CheckNoPlaceholderFields(const inference::ModelConfig& config, const std::string& path);

}  // namespace inflight::config
