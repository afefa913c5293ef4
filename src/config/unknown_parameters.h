// Parameter keys a model does not know: each is named in one warning, with the known key nearest
// to it, so that a typo such as kv_cache_free_gpu_mem_fracton does not pass silently (NVIDIA's
// backend ignores unknown keys without a word; we keep loading but say so).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model_config.pb.h"

namespace inflight::config {

// Levenshtein distance (insertions, deletions and substitutions of one byte each cost 1).
size_t EditDistance(std::string_view a, std::string_view b);

// The key of `known` at the least edit distance from `key` (the first one on a tie); nullopt when
// `known` is empty.
std::optional<std::string> NearestKey(std::string_view key, const std::vector<std::string>& known);

// One warning text per key of config.parameters() that is not in `known`, in key order, e.g.
// `model 'tensorrt_llm': unknown parameter "kv_cache_free_gpu_mem_fracton" is ignored; the
// nearest known key is "kv_cache_free_gpu_mem_fraction"`.
std::vector<std::string> UnknownParameterWarnings(const inference::ModelConfig& config,
                                                  const std::vector<std::string>& known);

// Logs UnknownParameterWarnings at warning level, once per (model, key) for the process (a model
// with several instances or reloaded does not repeat it).
void WarnUnknownParameters(const inference::ModelConfig& config,
                           const std::vector<std::string>& known);

}  // namespace inflight::config
