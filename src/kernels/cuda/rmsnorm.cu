#include "kernels/cuda/rmsnorm.h"

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kChunkElems = 8;            // 16 bytes of fp16/bf16
constexpr int kMaxRegisterChunks = 1024;  // one chunk per thread of a full block

// Grid: (num_tokens), Block: (kThreads). One row per block; the second pass re-reads the row from
// L1/L2 rather than holding it in registers, so any hidden size works.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    RmsNormKernel(T* out, const T* x, T* residual, const T* weight, std::int64_t hidden,
                  float eps) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
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

// Grid: (num_tokens), Block: (chunks rounded up to a warp). Thread c owns 16-byte chunk c of the
// row: one load of x (and residual), held in registers across the block reduction, one store. A
// decode step's rows (4096 wide: 512 threads) then take one pass instead of two.
template <typename T>
__global__ void __launch_bounds__(kMaxRegisterChunks)
    RmsNormRegisterKernel(T* out, const T* x, T* residual, const T* weight, int chunks, float eps) {
  const int c = static_cast<int>(threadIdx.x);
  const bool active = c < chunks;
  // The weights are no earlier kernel's output: their load may overlap the previous kernel's tail.
  const uint4 w = active ? reinterpret_cast<const uint4*>(weight)[c] : make_uint4(0, 0, 0, 0);
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const std::int64_t at = static_cast<std::int64_t>(blockIdx.x) * chunks + c;
  float v[kChunkElems] = {};
  float sum_sq = 0.0f;
  if (active) {
    const uint4 xv = reinterpret_cast<const uint4*>(x)[at];
    const T* xe = reinterpret_cast<const T*>(&xv);
    if (residual != nullptr) {
      uint4 rv = reinterpret_cast<const uint4*>(residual)[at];
      T* re = reinterpret_cast<T*>(&rv);
#pragma unroll
      for (int j = 0; j < kChunkElems; ++j) {
        // NOTE: the norm reads the rounded residual, as a model kept in fp16/bf16 does.
        re[j] = FromFloat<T>(ToFloat(re[j]) + ToFloat(xe[j]));
        v[j] = ToFloat(re[j]);
      }
      reinterpret_cast<uint4*>(residual)[at] = rv;
    } else {
#pragma unroll
      for (int j = 0; j < kChunkElems; ++j) v[j] = ToFloat(xe[j]);
    }
#pragma unroll
    for (int j = 0; j < kChunkElems; ++j) sum_sq += v[j] * v[j];
  }
  sum_sq = BlockSum(sum_sq);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(chunks * kChunkElems) + eps);
  if (active) {
    uint4 ov;
    T* oe = reinterpret_cast<T*>(&ov);
    const T* we = reinterpret_cast<const T*>(&w);
#pragma unroll
    for (int j = 0; j < kChunkElems; ++j) oe[j] = FromFloat<T>(v[j] * inv_rms * ToFloat(we[j]));
    reinterpret_cast<uint4*>(out)[at] = ov;
  }
}

bool FitsRegisterKernel(const void* out, const void* x, const void* residual, const void* weight,
                        std::int64_t hidden) {
  return hidden % kChunkElems == 0 && hidden / kChunkElems <= kMaxRegisterChunks &&
         Aligned16(out) && Aligned16(x) && Aligned16(residual) && Aligned16(weight);
}

}  // namespace

cudaError_t RmsNorm(void* out, const void* x, void* residual, const void* weight, DType dtype,
                    std::int64_t num_tokens, std::int64_t hidden, float eps, cudaStream_t stream) {
  if (num_tokens < 0 || hidden <= 0 || num_tokens > 0x7fffffff) return cudaErrorInvalidValue;
  if (num_tokens == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(num_tokens));
  if (FitsRegisterKernel(out, x, residual, weight, hidden)) {
    const int chunks = static_cast<int>(hidden / kChunkElems);
    const dim3 block(static_cast<unsigned>(CeilDiv(chunks, 32) * 32));
    INFLIGHT_DISPATCH_HALF(dtype, T, {
      return LaunchProgrammatic(RmsNormRegisterKernel<T>, grid, block, 0, stream,
                                static_cast<T*>(out), static_cast<const T*>(x),
                                static_cast<T*>(residual), static_cast<const T*>(weight), chunks,
                                eps);
    });
  }
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    return LaunchProgrammatic(RmsNormKernel<T>, grid, dim3(kThreads), 0, stream,
                              static_cast<T*>(out), static_cast<const T*>(x),
                              static_cast<T*>(residual), static_cast<const T*>(weight), hidden,
                              eps);
  });
  return cudaSuccess;
}

}  // namespace inflight::kernels::cuda
