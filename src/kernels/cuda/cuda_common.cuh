// Device helpers shared by the CUDA kernels: fp16/bf16 <-> fp32, warp and block reductions, dtype
// dispatch. Internal to src/kernels/cuda (launch headers expose only plain C++ types).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block; every thread gets the result. Precondition: blockDim.x is a multiple of 32.
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float scratch[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpSum(v);
  __syncthreads();  // NOTE: scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

__host__ __device__ constexpr std::int64_t CeilDiv(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace inflight::kernels::cuda

// Runs the statements with T bound to the CUDA type of `dtype` (fp16 or bf16); other dtypes return
// cudaErrorInvalidValue from the enclosing launcher.
#define INFLIGHT_DISPATCH_HALF(dtype, T, ...) \
  switch (dtype) {                            \
    case ::inflight::DType::kFloat16: {       \
      using T = __half;                       \
      __VA_ARGS__;                            \
      break;                                  \
    }                                         \
    case ::inflight::DType::kBFloat16: {      \
      using T = __nv_bfloat16;                \
      __VA_ARGS__;                            \
      break;                                  \
    }                                         \
    default:                                  \
      return cudaErrorInvalidValue;           \
  }
