// What the config fuzzers check on one input, shared with the corpus gtest
// (tests/unit/config/fuzz_corpus_test.cc) so CI runs the same checks without clang.
// Each returns "" when every invariant holds, else what broke; the loaders may reject the input.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "config/llm_params.h"
#include "config/model_config_loader.h"

namespace inflight::config::fuzz {

// A parsed message must print as JSON, that JSON must parse, and printing it again must give the
// same JSON (int64 post-processing and enum names are stable). LlmParams must not crash.
inline std::string CheckParsed(const inference::ModelConfig& config) {
  (void)LlmParams::FromModelConfig(config);
  auto json = ModelConfigToJson(config);
  if (!json.ok()) return "ModelConfigToJson failed: " + json.status().ToString();
  auto reparsed = ParseModelConfigJson(*json);
  if (!reparsed.ok()) {
    return "the JSON we printed does not parse: " + reparsed.status().ToString() + "\n" +
           json->substr(0, 2000);
  }
  auto json_again = ModelConfigToJson(*reparsed);
  if (!json_again.ok()) return "ModelConfigToJson failed the second time";
  // Compared as JSON values: protobuf prints map entries in no fixed order.
  auto first = nlohmann::json::parse(*json, nullptr, /*allow_exceptions=*/false);
  auto second = nlohmann::json::parse(*json_again, nullptr, /*allow_exceptions=*/false);
  if (first.is_discarded() || first != second) {
    return "JSON round trip changed:\n" + json->substr(0, 2000) + "\n" +
           json_again->substr(0, 2000);
  }
  return "";
}

// `parsed` (may be null) tells the caller whether the loader accepted the input.
inline std::string CheckText(std::string_view data, bool* parsed = nullptr) {
  auto config = ParseModelConfigText(data);
  if (parsed != nullptr) *parsed = config.ok();
  if (!config.ok()) {
    return config.status().message().empty() ? "an error without a message" : "";
  }
  return CheckParsed(*config);
}

inline std::string CheckJson(std::string_view data, bool* parsed = nullptr) {
  auto config = ParseModelConfigJson(data);
  if (parsed != nullptr) *parsed = config.ok();
  if (!config.ok()) {
    return config.status().message().empty() ? "an error without a message" : "";
  }
  return CheckParsed(*config);
}

}  // namespace inflight::config::fuzz
