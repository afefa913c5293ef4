#include "kernels/cuda/paged_attention_context.h"

#include <cmath>
#include <cstdint>

#include "kernels/cuda/paged_attention_context_fp8.cuh"
#include "kernels/cuda/paged_attention_context_impl.cuh"

namespace inflight::kernels::cuda {

namespace {

// PagedAttentionContext over pools of T (fp8 null) or an FP8 cache's codes with their scales.
cudaError_t LaunchPagedAttentionContext(void* out, const void* q, std::int64_t q_token_stride,
                                        const void* k_pool, const void* v_pool,
                                        const PagedBatch& batch, const PagedKvShape& shape,
                                        std::int64_t num_heads, float scale,
                                        const AttentionWindow& window, DType dtype,
                                        const KvFp8Scales* fp8, cudaStream_t stream) {
  if (batch.num_seqs < 0 || batch.max_query_len < 0 || num_heads <= 0 || shape.num_kv_heads <= 0 ||
      num_heads % shape.num_kv_heads != 0 || shape.tokens_per_block <= 0 || num_heads > 65535 ||
      batch.num_seqs > 65535) {
    return cudaErrorInvalidValue;
  }
  // The kernel moves Q, K and V rows as 16-byte chunks and writes outputs in pairs.
  const auto misaligned = [](const void* p, std::uintptr_t bytes) {
    return reinterpret_cast<std::uintptr_t>(p) % bytes != 0;
  };
  if (misaligned(q, 16) || misaligned(k_pool, 16) || misaligned(v_pool, 16) || misaligned(out, 4) ||
      q_token_stride % 8 != 0 || !(scale > 0.0f) || window.window < 0 || window.sink < 0 ||
      (window.window == 0 && window.sink != 0)) {
    return cudaErrorInvalidValue;
  }
  if (batch.num_seqs == 0 || batch.max_query_len == 0) return cudaSuccess;
  detail::ContextArgs args{out, q, q_token_stride, k_pool, v_pool, batch,
                           static_cast<int>(num_heads), static_cast<int>(shape.num_kv_heads),
                           static_cast<int>(shape.tokens_per_block),
                           // An FP8 cache's scores are k_scale * (q . codes).
                           scale * static_cast<float>(M_LOG2E) * (fp8 != nullptr ? fp8->k : 1.0f),
                           window.window, window.sink, fp8 != nullptr ? fp8->v : 1.0f};
  if (fp8 != nullptr) {
    switch (shape.head_dim) {
      case 64:
        return detail::LaunchContextAttentionFp8Hd64(args, dtype, stream);
      case 128:
        return detail::LaunchContextAttentionFp8Hd128(args, dtype, stream);
      default:
        return cudaErrorInvalidValue;
    }
  }
  switch (shape.head_dim) {
    case 64:
      return detail::LaunchContextAttentionHd64(args, dtype, stream);
    case 80:
      return detail::LaunchContextAttentionHd80(args, dtype, stream);
    case 96:
      return detail::LaunchContextAttentionHd96(args, dtype, stream);
    case 128:
      return detail::LaunchContextAttentionHd128(args, dtype, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t PagedAttentionContext(void* out, const void* q, std::int64_t q_token_stride,
                                  const void* k_pool, const void* v_pool, const PagedBatch& batch,
                                  const PagedKvShape& shape, std::int64_t num_heads, float scale,
                                  const AttentionWindow& window, DType dtype, cudaStream_t stream) {
  return LaunchPagedAttentionContext(out, q, q_token_stride, k_pool, v_pool, batch, shape,
                                     num_heads, scale, window, dtype, nullptr, stream);
}

cudaError_t PagedAttentionContextFp8(void* out, const void* q, std::int64_t q_token_stride,
                                     const void* k_pool, const void* v_pool,
                                     const KvFp8Scales& scales, const PagedBatch& batch,
                                     const PagedKvShape& shape, std::int64_t num_heads, float scale,
                                     const AttentionWindow& window, DType dtype,
                                     cudaStream_t stream) {
  if (!scales.valid() || !Fp8KvHeadDimSupported(shape.head_dim)) return cudaErrorInvalidValue;
  return LaunchPagedAttentionContext(out, q, q_token_stride, k_pool, v_pool, batch, shape,
                                     num_heads, scale, window, dtype, &scales, stream);
}

}  // namespace inflight::kernels::cuda
