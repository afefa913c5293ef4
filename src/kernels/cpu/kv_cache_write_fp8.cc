#include "kernels/cpu/kv_cache_write_fp8.h"

#include "common/fp8_e4m3.h"
#include "kernels/cpu/kv_cache_write.h"

namespace inflight::kernels::cpu {

void KvCacheWriteFp8(std::uint8_t* k_pool, std::uint8_t* v_pool, const float* k, const float* v,
                     std::int64_t kv_token_stride, const PagedBatch& batch,
                     const PagedKvShape& shape, float k_scale, float v_scale) {
  // Multiplying by the reciprocal would round differently from the division the GPU kernel is
  // specified to do; divide.
  ForEachNewKvHead(kv_token_stride, batch, shape, [&](std::int64_t src, std::int64_t dst) {
    for (std::int64_t d = 0; d < shape.head_dim; ++d) {
      k_pool[dst + d] = FloatToFp8E4M3(k[src + d] / k_scale);
      v_pool[dst + d] = FloatToFp8E4M3(v[src + d] / v_scale);
    }
  });
}

}  // namespace inflight::kernels::cpu
