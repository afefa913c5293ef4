#include "kernels/cpu/paged_attention.h"

#include "kernels/cpu/paged_attention_impl.h"

namespace inflight::kernels::cpu {

void PagedAttention(float* out, const float* q, std::int64_t q_token_stride, const float* k_pool,
                    const float* v_pool, const PagedBatch& batch, const PagedKvShape& shape,
                    std::int64_t num_heads, float scale, const AttentionWindow& window,
                    ThreadPool* pool) {
  const auto make_rows = [&] {
    return [&](bool v, std::int64_t offset) { return (v ? v_pool : k_pool) + offset; };
  };
  detail::PagedAttentionOver(out, q, q_token_stride, batch, shape, num_heads, scale, window, pool,
                             make_rows);
}

}  // namespace inflight::kernels::cpu
