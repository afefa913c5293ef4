#include "kernels/cpu/kv_cache_write.h"

#include <cstring>

namespace inflight::kernels::cpu {

void KvCacheWrite(float* k_pool, float* v_pool, const float* k, const float* v,
                  std::int64_t kv_token_stride, const PagedBatch& batch,
                  const PagedKvShape& shape) {
  const std::size_t head_bytes = static_cast<std::size_t>(shape.head_dim) * sizeof(float);
  ForEachNewKvHead(kv_token_stride, batch, shape, [&](std::int64_t src, std::int64_t dst) {
    std::memcpy(k_pool + dst, k + src, head_bytes);
    std::memcpy(v_pool + dst, v + src, head_bytes);
  });
}

}  // namespace inflight::kernels::cpu
