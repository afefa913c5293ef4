#include "kernels/cpu/paged_attention_fp8.h"

#include <vector>

#include "common/fp8_e4m3.h"
#include "kernels/cpu/paged_attention_impl.h"

namespace inflight::kernels::cpu {

void PagedAttentionFp8(float* out, const float* q, std::int64_t q_token_stride,
                       const std::uint8_t* k_pool, const std::uint8_t* v_pool, float k_scale,
                       float v_scale, const PagedBatch& batch, const PagedKvShape& shape,
                       std::int64_t num_heads, float scale, const AttentionWindow& window,
                       ThreadPool* pool) {
  const std::int64_t head_dim = shape.head_dim;
  // Each worker dequantizes the row it reads into its own scratch row.
  const auto make_rows = [&] {
    return [&, row = std::vector<float>(static_cast<std::size_t>(head_dim))](
               bool v, std::int64_t offset) mutable {
      const std::uint8_t* base = (v ? v_pool : k_pool) + offset;
      const float s = v ? v_scale : k_scale;
      for (std::int64_t d = 0; d < head_dim; ++d) row[d] = Fp8E4M3ToFloat(base[d]) * s;
      return static_cast<const float*>(row.data());
    };
  };
  detail::PagedAttentionOver(out, q, q_token_stride, batch, shape, num_heads, scale, window, pool,
                             make_rows);
}

}  // namespace inflight::kernels::cpu
