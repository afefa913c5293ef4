#include "executor/runner_factory.h"

#include <algorithm>

#include "common/logging.h"

namespace inflight::executor {

Result<std::unique_ptr<model::ModelRunner>> CreateModelRunner(const std::string& engine_dir,
                                                              const model::EngineConfig& engine,
                                                              const ExecutorConfig& config) {
  if (config.device == DeviceKind::kCuda) {
    return Unsupported("device \"cuda\" was requested, but this build has no CUDA model runner yet; "
                       "accepted: auto, cpu");
  }
  // fp32 K and V for every layer.
  const std::int64_t bytes_per_token = 2 * engine.num_layers * engine.num_kv_heads * engine.head_dim * 4;
  const std::int64_t full = static_cast<std::int64_t>(engine.build.max_batch_size) * engine.build.max_seq_len;
  std::int64_t tokens = std::min(full, kDefaultCpuKvCacheBytes / std::max<std::int64_t>(bytes_per_token, 1));
  tokens = std::max<std::int64_t>(tokens, engine.build.max_seq_len);
  if (config.kv_cache_config.max_tokens) tokens = *config.kv_cache_config.max_tokens;
  if (tokens < engine.build.tokens_per_block) {
    return InvalidArgument("max_tokens_in_paged_kv_cache " + std::to_string(tokens) +
                           " is smaller than one KV block (" +
                           std::to_string(engine.build.tokens_per_block) + " tokens)");
  }
  model::RunnerOptions options;
  options.max_kv_tokens = tokens;
  LOG_INFO("executor: CPU runner, KV cache {} tokens ({} MiB)", tokens,
           tokens * bytes_per_token / (1 << 20));
  return model::CreateCpuModelRunner(engine_dir, options);
}

}  // namespace inflight::executor
