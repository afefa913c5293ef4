#include "kernels/cpu/kv_cache_write_fp8.h"

#include "common/fp8_e4m3.h"

namespace inflight::kernels::cpu {

void KvCacheWriteFp8(std::uint8_t* k_pool, std::uint8_t* v_pool, const float* k, const float* v,
                     std::int64_t kv_token_stride, const PagedBatch& batch,
                     const PagedKvShape& shape, float k_scale, float v_scale) {
  // Multiplying by the reciprocal would round differently from the division the GPU kernel is
  // specified to do; divide.
  for (std::int32_t s = 0; s < batch.num_seqs; ++s) {
    const std::int32_t* table = batch.table(s);
    for (std::int32_t r = batch.query_start[s]; r < batch.query_start[s + 1]; ++r) {
      const std::int64_t pos = batch.num_cached[s] + (r - batch.query_start[s]);
      const std::int64_t block = table[pos / shape.tokens_per_block];
      const std::int64_t slot = pos % shape.tokens_per_block;
      for (std::int64_t h = 0; h < shape.num_kv_heads; ++h) {
        const std::int64_t src = r * kv_token_stride + h * shape.head_dim;
        const std::int64_t dst = shape.Offset(block, h, slot);
        for (std::int64_t d = 0; d < shape.head_dim; ++d) {
          k_pool[dst + d] = FloatToFp8E4M3(k[src + d] / k_scale);
          v_pool[dst + d] = FloatToFp8E4M3(v[src + d] / v_scale);
        }
      }
    }
  }
}

}  // namespace inflight::kernels::cpu
