#include "kernels/cuda/layernorm.h"

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Grid: (num_tokens), Block: (kThreads). Three passes over the row (sum, centred squares, write);
// the centred pass avoids the cancellation of E[x^2] - E[x]^2.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    LayerNormKernel(T* out, const T* x, T* residual, const T* weight, const T* bias,
                    std::int64_t hidden, float eps) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * hidden;
  const T* xr = x + base;
  T* rr = residual != nullptr ? residual + base : nullptr;
  float sum = 0.0f;
  for (std::int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    float v = ToFloat(xr[i]);
    if (rr != nullptr) {
      const T s = FromFloat<T>(ToFloat(rr[i]) + v);
      rr[i] = s;
      v = ToFloat(s);
    }
    sum += v;
  }
  const float mean = BlockSum(sum) / static_cast<float>(hidden);
  const T* src = rr != nullptr ? rr : xr;
  float sum_sq = 0.0f;
  for (std::int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    const float d = ToFloat(src[i]) - mean;
    sum_sq += d * d;
  }
  const float inv_std = rsqrtf(BlockSum(sum_sq) / static_cast<float>(hidden) + eps);
  T* orow = out + base;
  for (std::int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    float v = (ToFloat(src[i]) - mean) * inv_std * ToFloat(weight[i]);
    if (bias != nullptr) v += ToFloat(bias[i]);
    orow[i] = FromFloat<T>(v);
  }
}

}  // namespace

cudaError_t LayerNorm(void* out, const void* x, void* residual, const void* weight,
                      const void* bias, DType dtype, std::int64_t num_tokens, std::int64_t hidden,
                      float eps, cudaStream_t stream) {
  if (num_tokens < 0 || hidden <= 0 || num_tokens > 0x7fffffff) return cudaErrorInvalidValue;
  if (num_tokens == 0) return cudaSuccess;
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    return LaunchProgrammatic(
        LayerNormKernel<T>, dim3(static_cast<unsigned>(num_tokens)), dim3(kThreads), 0, stream,
        static_cast<T*>(out), static_cast<const T*>(x), static_cast<T*>(residual),
        static_cast<const T*>(weight), static_cast<const T*>(bias), hidden, eps);
  });
  return cudaSuccess;
}

}  // namespace inflight::kernels::cuda
