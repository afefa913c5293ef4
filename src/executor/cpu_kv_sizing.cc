#include "executor/cpu_kv_sizing.h"

#include <algorithm>
#include <string>

namespace inflight::executor {

Result<CpuKvCacheSize> SizeCpuKvCache(const model::EngineConfig& engine,
                                      const model::ModelShard& shard, const KvCacheConfig& kv) {
  CpuKvCacheSize size;
  // K and V for each of the shard's layers and kv heads: fp32, or E4M3 bytes for an FP8 KV cache
  // (4x the tokens).
  size.bytes_per_token = 2 * shard.num_layers() * shard.num_kv_heads * engine.head_dim *
                         (engine.quant.kv_cache_fp8 ? 1 : 4);
  const std::int64_t full =
      static_cast<std::int64_t>(engine.build.max_batch_size) * engine.build.max_seq_len;
  std::int64_t tokens =
      std::min(full, kDefaultCpuKvCacheBytes / std::max<std::int64_t>(size.bytes_per_token, 1));
  tokens = std::max<std::int64_t>(tokens, engine.build.max_seq_len);
  if (kv.max_tokens) tokens = *kv.max_tokens;
  if (tokens < engine.build.tokens_per_block) {
    return InvalidArgument("max_tokens_in_paged_kv_cache " + std::to_string(tokens) +
                           " is smaller than one KV block (" +
                           std::to_string(engine.build.tokens_per_block) + " tokens)");
  }
  size.tokens = tokens;
  return size;
}

}  // namespace inflight::executor
