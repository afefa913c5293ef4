#include "kernels/cuda/activations.h"

#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 256;

unsigned GridFor(std::int64_t n) {
  // A grid-stride loop covers the rest; 64k blocks keep every SM busy.
  return static_cast<unsigned>(std::min<std::int64_t>(CeilDiv(n, kThreads), 65536));
}

// Grid: (min(ceil(num_tokens * inter / kThreads), 65536)), Block: (kThreads); grid-stride.
template <typename T>
__global__ void SwiGluKernel(T* out, const T* gate_up, std::int64_t num_tokens,
                             std::int64_t inter) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const std::int64_t n = num_tokens * inter;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t t = idx / inter, i = idx - t * inter;
    const float g = ToFloat(gate_up[t * 2 * inter + i]);
    const float u = ToFloat(gate_up[t * 2 * inter + inter + i]);
    out[idx] = FromFloat<T>(g / (1.0f + expf(-g)) * u);
  }
}

// Grid: (min(ceil(n / kThreads), 65536)), Block: (kThreads); grid-stride.
template <typename T>
__global__ void GeluNewKernel(T* out, const T* x, std::int64_t n) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const float v = ToFloat(x[idx]);
    out[idx] = FromFloat<T>(0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v))));
  }
}

}  // namespace

cudaError_t SwiGlu(void* out, const void* gate_up, DType dtype, std::int64_t num_tokens,
                   std::int64_t inter, cudaStream_t stream) {
  if (num_tokens < 0 || inter <= 0) return cudaErrorInvalidValue;
  if (num_tokens == 0) return cudaSuccess;
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    return LaunchProgrammatic(SwiGluKernel<T>, dim3(GridFor(num_tokens * inter)), dim3(kThreads), 0,
                              stream, static_cast<T*>(out), static_cast<const T*>(gate_up),
                              num_tokens, inter);
  });
  return cudaSuccess;
}

cudaError_t GeluNew(void* out, const void* x, DType dtype, std::int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    return LaunchProgrammatic(GeluNewKernel<T>, dim3(GridFor(n)), dim3(kThreads), 0, stream,
                              static_cast<T*>(out), static_cast<const T*>(x), n);
  });
  return cudaSuccess;
}

}  // namespace inflight::kernels::cuda
