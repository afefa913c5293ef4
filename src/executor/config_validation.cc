// Validate() of the public configuration structs: each error names the field, the value and the
// range.
#include <cmath>
#include <string>

#include "inflight/executor.h"

namespace inflight {

Status KvCacheConfig::Validate() const {
  if (max_tokens && *max_tokens < 1) {
    return InvalidArgument("max_tokens_in_paged_kv_cache " + std::to_string(*max_tokens) +
                           " is out of range: must be >= 1");
  }
  if (free_gpu_memory_fraction &&
      (!(*free_gpu_memory_fraction > 0.0f) || *free_gpu_memory_fraction > 1.0f)) {
    return InvalidArgument("kv_cache_free_gpu_mem_fraction " +
                           std::to_string(*free_gpu_memory_fraction) +
                           " is out of range: must be in (0, 1]");
  }
  if (host_cache_size < 0) {
    return InvalidArgument("kv_cache_host_memory_bytes " + std::to_string(host_cache_size) +
                           " is out of range: must be >= 0");
  }
  if (max_attention_window) {
    for (SizeType w : *max_attention_window) {
      if (w < 1) {
        return InvalidArgument("max_attention_window_size " + std::to_string(w) +
                               " is out of range: must be >= 1");
      }
    }
  }
  if (sink_token_length && *sink_token_length < 0) {
    return InvalidArgument("sink_token_length " + std::to_string(*sink_token_length) +
                           " is out of range: must be >= 0");
  }
  return Status::Ok();
}

Status ExecutorConfig::Validate() const {
  if (max_beam_width != 1) {
    return InvalidArgument("max_beam_width " + std::to_string(max_beam_width) +
                           " is not supported: beam search is not implemented yet (only 1)");
  }
  if (max_batch_size && *max_batch_size < 1) {
    return InvalidArgument("max_batch_size " + std::to_string(*max_batch_size) + " must be >= 1");
  }
  if (max_num_tokens && *max_num_tokens < 1) {
    return InvalidArgument("max_num_tokens " + std::to_string(*max_num_tokens) + " must be >= 1");
  }
  if (iter_stats_max_iterations < 0) {
    return InvalidArgument("iter_stats_max_iterations " +
                           std::to_string(iter_stats_max_iterations) + " must be >= 0");
  }
  RETURN_IF_ERROR(scheduler_config.Validate());
  return kv_cache_config.Validate();
}

}  // namespace inflight
