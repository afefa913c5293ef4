#include "kernels/cuda/rmsnorm.h"

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Grid: (num_tokens), Block: (kThreads). One row per block; the second pass re-reads the row from
// L1/L2 rather than holding it in registers, so any hidden size works.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    RmsNormKernel(T* out, const T* x, T* residual, const T* weight, std::int64_t hidden,
                  float eps) {
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * hidden;
  const T* xr = x + base;
  T* rr = residual != nullptr ? residual + base : nullptr;
  float sum_sq = 0.0f;
  for (std::int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    float v = ToFloat(xr[i]);
    if (rr != nullptr) {
      // NOTE: the norm reads the rounded residual, as a model kept in fp16/bf16 does.
      const T s = FromFloat<T>(ToFloat(rr[i]) + v);
      rr[i] = s;
      v = ToFloat(s);
    }
    sum_sq += v * v;
  }
  sum_sq = BlockSum(sum_sq);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(hidden) + eps);
  const T* src = rr != nullptr ? rr : xr;
  T* orow = out + base;
  for (std::int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    orow[i] = FromFloat<T>(ToFloat(src[i]) * inv_rms * ToFloat(weight[i]));
  }
}

}  // namespace

cudaError_t RmsNorm(void* out, const void* x, void* residual, const void* weight, DType dtype,
                    std::int64_t num_tokens, std::int64_t hidden, float eps, cudaStream_t stream) {
  if (num_tokens < 0 || hidden <= 0 || num_tokens > 0x7fffffff) return cudaErrorInvalidValue;
  if (num_tokens == 0) return cudaSuccess;
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    RmsNormKernel<T><<<static_cast<unsigned>(num_tokens), kThreads, 0, stream>>>(
        static_cast<T*>(out), static_cast<const T*>(x), static_cast<T*>(residual),
        static_cast<const T*>(weight), hidden, eps);
  });
  return cudaGetLastError();
}

}  // namespace inflight::kernels::cuda
