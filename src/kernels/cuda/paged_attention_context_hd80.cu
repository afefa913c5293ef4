#include "kernels/cuda/paged_attention_context_impl.cuh"

namespace inflight::kernels::cuda::detail {

cudaError_t LaunchContextAttentionHd80(const ContextArgs& args, DType dtype, cudaStream_t stream) {
  INFLIGHT_DISPATCH_HALF(dtype, T, { return LaunchContextAttention<T, 80>(args, stream); });
  return cudaErrorInvalidValue;
}

}  // namespace inflight::kernels::cuda::detail
