#include "kernels/cuda/paged_attention_context_fp8.cuh"

namespace inflight::kernels::cuda::detail {

cudaError_t LaunchContextAttentionFp8Hd128(const ContextArgs& args, DType dtype,
                                           cudaStream_t stream) {
  INFLIGHT_DISPATCH_HALF(dtype, T, { return LaunchContextAttentionFp8<T, 128>(args, stream); });
  return cudaErrorInvalidValue;
}

}  // namespace inflight::kernels::cuda::detail
