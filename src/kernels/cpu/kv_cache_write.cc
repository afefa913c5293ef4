#include "kernels/cpu/kv_cache_write.h"

#include <cstring>

namespace inflight::kernels::cpu {

void KvCacheWrite(float* k_pool, float* v_pool, const float* k, const float* v,
                  std::int64_t kv_token_stride, const PagedBatch& batch,
                  const PagedKvShape& shape) {
  const std::size_t head_bytes = static_cast<std::size_t>(shape.head_dim) * sizeof(float);
  for (std::int32_t s = 0; s < batch.num_seqs; ++s) {
    const std::int32_t* table = batch.table(s);
    for (std::int32_t r = batch.query_start[s]; r < batch.query_start[s + 1]; ++r) {
      const std::int64_t pos = batch.num_cached[s] + (r - batch.query_start[s]);
      const std::int64_t block = table[pos / shape.tokens_per_block];
      const std::int64_t slot = pos % shape.tokens_per_block;
      for (std::int64_t h = 0; h < shape.num_kv_heads; ++h) {
        const std::int64_t src = r * kv_token_stride + h * shape.head_dim;
        const std::int64_t dst = shape.Offset(block, h, slot);
        std::memcpy(k_pool + dst, k + src, head_bytes);
        std::memcpy(v_pool + dst, v + src, head_bytes);
      }
    }
  }
}

}  // namespace inflight::kernels::cpu
