// Typed access to ModelConfig.parameters (map<string, ModelParameter{string_value}>), with the
// conventions of NVIDIA's backend: an absent, empty or unfilled ("${name}") value means "unset".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model_config.pb.h"

namespace inflight::config {

// True for a value that fill_template.py left as is: "${name}" (surrounding blanks ignored).
bool IsUnfilledPlaceholder(std::string_view value);

// The parameter's string value, or nullopt when it is absent, empty or an unfilled placeholder.
// In the nullopt case it logs once per (model, key) that the default is used; `default_text`, when
// given, is named in that line.
std::optional<std::string> GetParameter(const inference::ModelConfig& config,
                                        const std::string& key, std::string_view default_text = {});

// Value parsers; `key` only names the parameter in errors such as
// `Invalid value "abc" for parameter kv_cache_free_gpu_mem_fraction: expected a number`.
// Booleans: true/false, yes/no, 1/0, any case. Surrounding blanks are ignored.
Result<bool> ParseBoolValue(std::string_view key, std::string_view value);
Result<int64_t> ParseIntValue(std::string_view key, std::string_view value);
Result<double> ParseFloatValue(std::string_view key, std::string_view value);

// nullopt when unset (see GetParameter); an error when set but not of the type.
Result<std::optional<bool>> GetBoolParameter(const inference::ModelConfig& config,
                                             const std::string& key);
Result<std::optional<int64_t>> GetIntParameter(const inference::ModelConfig& config,
                                               const std::string& key);
Result<std::optional<double>> GetFloatParameter(const inference::ModelConfig& config,
                                                const std::string& key);

// "1,2,3" -> {1,2,3}. A trailing comma is allowed ("1,2,"); "", "a", ",", ",," and "1,,2" are
// rejected (as NVIDIA's csvStrToVecInt, but stricter about empty items in the middle).
Result<std::vector<int32_t>> ParseCsvInts(std::string_view key, std::string_view value);
// "{1,5},{1,2,3}" -> {{1,5},{1,2,3}} (medusa_choices, eagle_choices; csvStrToVecVecInt).
Result<std::vector<std::vector<int32_t>>> ParseCsvIntGroups(std::string_view key,
                                                            std::string_view value);
// "0,1;2,3" -> {{0,1},{2,3}}: one group per model instance (gpu_device_ids, participant_ids).
Result<std::vector<std::vector<int32_t>>> ParseDeviceIdGroups(std::string_view key,
                                                              std::string_view value);

}  // namespace inflight::config
