#include "kernels/cuda/quant_activation_fp8.h"

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/quant_codes.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One block per token row. Grid: (m), Block: (kThreads).
template <typename T>
__global__ void QuantizeRowsKernel(T* x, std::int64_t x_stride, std::int64_t k, float static_scale,
                                   std::uint8_t* codes, float* row_scales) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  T* row = x + blockIdx.x * x_stride;
  float s = static_scale;
  if (!(s > 0.0f)) {
    float amax = 0.0f;
    for (std::int64_t i = threadIdx.x; i < k; i += kThreads)
      amax = fmaxf(amax, fabsf(ToFloat(row[i])));
    amax = BlockMax(amax);
    s = ActivationFp8Scale(0.0f, amax);
  }
  if (row_scales != nullptr && threadIdx.x == 0) row_scales[blockIdx.x] = s;
  std::uint8_t* code_row = codes != nullptr ? codes + blockIdx.x * k : nullptr;
  for (std::int64_t i = threadIdx.x; i < k; i += kThreads) {
    // NOTE: a true division, as the CPU reference (x * (1 / s) rounds differently).
    const std::uint8_t q = FloatToE4M3(__fdiv_rn(ToFloat(row[i]), s));
    if (code_row != nullptr) {
      code_row[i] = q;
    } else {
      row[i] = FromFloat<T>(E4M3ToFloat(q) * s);
    }
  }
}

// The same, 8 elements (16 bytes) a thread, for k % 8 == 0 and 16-byte aligned rows (8-byte aligned
// code rows): the scalar kernel's 2-byte accesses ran the FP8 linear's activation pass well under
// the copy rate. Grid: (m), Block: (kThreads).
template <typename T>
__global__ void QuantizeRowsVec8Kernel(T* x, std::int64_t x_stride, int k, float static_scale,
                                       std::uint8_t* codes, float* row_scales) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  T* row = x + blockIdx.x * x_stride;
  const int vectors = k / 8;
  float s = static_scale;
  if (!(s > 0.0f)) {
    float amax = 0.0f;
    for (int v = threadIdx.x; v < vectors; v += kThreads) {
      Vec8<T> in;
      in.bits = *reinterpret_cast<const uint4*>(row + 8 * v);
#pragma unroll
      for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(ToFloat(in.e[j])));
    }
    amax = BlockMax(amax);
    s = ActivationFp8Scale(0.0f, amax);
  }
  if (row_scales != nullptr && threadIdx.x == 0) row_scales[blockIdx.x] = s;
  std::uint8_t* code_row =
      codes != nullptr ? codes + blockIdx.x * static_cast<std::int64_t>(k) : nullptr;
  for (int v = threadIdx.x; v < vectors; v += kThreads) {
    Vec8<T> in;
    in.bits = *reinterpret_cast<const uint4*>(row + 8 * v);
    union {
      uint2 bits;
      std::uint8_t e[8];
    } q;
    q.bits = ActivationCodes8(in, s);
    if (code_row != nullptr) {
      *reinterpret_cast<uint2*>(code_row + 8 * v) = q.bits;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) in.e[j] = FromFloat<T>(E4M3ToFloat(q.e[j]) * s);
      *reinterpret_cast<uint4*>(row + 8 * v) = in.bits;
    }
  }
}

}  // namespace

cudaError_t QuantizeActivationsFp8(void* x, std::int64_t x_stride, DType dtype, std::int64_t m,
                                   std::int64_t k, float static_scale, std::uint8_t* codes,
                                   float* row_scales, cudaStream_t stream) {
  if (m < 0 || k <= 0 || x_stride < k) return cudaErrorInvalidValue;
  if (m == 0) return cudaSuccess;
  const bool vec8 = k % 8 == 0 && x_stride % 8 == 0 && k <= (std::int64_t{1} << 30) &&
                    Aligned16(x) &&
                    (codes == nullptr || reinterpret_cast<std::uintptr_t>(codes) % 8 == 0);
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    if (vec8) {
      return LaunchProgrammatic(QuantizeRowsVec8Kernel<T>, dim3(static_cast<unsigned>(m)),
                                dim3(kThreads), 0, stream, static_cast<T*>(x), x_stride,
                                static_cast<int>(k), static_scale, codes, row_scales);
    }
    return LaunchProgrammatic(QuantizeRowsKernel<T>, dim3(static_cast<unsigned>(m)), dim3(kThreads),
                              0, stream, static_cast<T*>(x), x_stride, k, static_scale, codes,
                              row_scales);
  });
  return cudaErrorInvalidValue;
}

}  // namespace inflight::kernels::cuda
