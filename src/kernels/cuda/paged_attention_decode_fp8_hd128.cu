#include "kernels/cuda/paged_attention_decode_impl.cuh"

namespace inflight::kernels::cuda::detail {

cudaError_t LaunchDecodeAttentionFp8Hd128(const DecodeArgs& args, DType dtype,
                                          cudaStream_t stream) {
  INFLIGHT_DISPATCH_HALF(dtype, T,
                         { return LaunchDecodeAttention<T, 128, Fp8Code>(args, stream); });
  return cudaErrorInvalidValue;
}

}  // namespace inflight::kernels::cuda::detail
