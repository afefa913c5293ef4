#include "kernels/cuda/fp8_activation_producers.h"

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/quant_codes.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kNormMaxThreads = 1024;   // RMSNorm: a 16-byte chunk a thread, hidden <= 8192
constexpr int kThreads = 256;           // SwiGLU
constexpr int kSwiGluMaxInter = 32768;  // its row in shared memory: 64 KiB at most

// The row's scale (quant_codes.cuh's rule), written by thread 0; every thread of the block calls
// it with its part of the row's amax. A static scale needs no amax, so the block reduces it only
// under a dynamic one: one block reduction (two barriers) less, the same codes.
__device__ __forceinline__ float RowScale(float thread_amax, float static_scale,
                                          float* row_scales) {
  const float amax = static_scale > 0.0f ? 0.0f : BlockMax(thread_amax);
  const float s = ActivationFp8Scale(static_scale, amax);
  if (threadIdx.x == 0) row_scales[blockIdx.x] = s;
  return s;
}

// One row per block, thread c owning 16-byte chunk c, as rmsnorm.cu's register kernel (the same
// partial sums in the same block reduction, so the same bits). Grid: (num_tokens), Block: (chunks
// rounded up to a warp).
template <typename T>
__global__ void __launch_bounds__(kNormMaxThreads)
    RmsNormQuantKernel(Fp8Rows out, const T* x, const T* weight, int chunks, float eps,
                       float static_scale) {
  const int c = static_cast<int>(threadIdx.x);
  const bool active = c < chunks;
  Vec8<T> w;
  w.bits = active ? reinterpret_cast<const uint4*>(weight)[c] : make_uint4(0, 0, 0, 0);
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const std::int64_t at = static_cast<std::int64_t>(blockIdx.x) * chunks + c;
  Vec8<T> v;
  float sum_sq = 0.0f;
  if (active) {
    v.bits = reinterpret_cast<const uint4*>(x)[at];
#pragma unroll
    for (int j = 0; j < 8; ++j) sum_sq += ToFloat(v.e[j]) * ToFloat(v.e[j]);
  }
  sum_sq = BlockSum(sum_sq);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(chunks * 8) + eps);
  float amax = 0.0f;
  if (active) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      v.e[j] = FromFloat<T>(ToFloat(v.e[j]) * inv_rms * ToFloat(w.e[j]));
      amax = fmaxf(amax, fabsf(ToFloat(v.e[j])));
    }
  }
  const float s = RowScale(amax, static_scale, out.row_scales);
  if (active) reinterpret_cast<uint2*>(out.codes)[at] = ActivationCodes8(v, s);
}

// One row per block: the gate/up products of the row through Fp8SwiGluEpilogueVec8Kernel's
// arithmetic into shared memory (rounded to T, as that kernel writes them) until the row's amax is
// known, then their codes. Grid: (m), Block: (kThreads), dynamic shared memory: inter elements of
// T.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    SwiGluCodesKernel(Fp8Rows out, const __nv_bfloat16* raw, const float* row_scales,
                      const float* col_scales, bool per_channel, const T* bias, int inter,
                      float static_scale) {
  extern __shared__ uint4 s_act[];  // inter / 8 chunks of 8 T
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const int chunks = inter / 8;
  const __nv_bfloat16* row = raw + static_cast<std::int64_t>(blockIdx.x) * 2 * inter;
  const float rs = row_scales[blockIdx.x];
  float amax = 0.0f;
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    const int o = 8 * c;
    Vec8<__nv_bfloat16> rg, ru;
    rg.bits = *reinterpret_cast<const uint4*>(row + o);
    ru.bits = *reinterpret_cast<const uint4*>(row + inter + o);
    Vec8<T> gb, ub, act;
    if (bias != nullptr) {
      gb.bits = *reinterpret_cast<const uint4*>(bias + o);
      ub.bits = *reinterpret_cast<const uint4*>(bias + inter + o);
    }
    // NOTE: the scales in 16-byte loads, as the epilogue kernels (every row reads them again).
    float gs[8], us[8];
    LoadColumnScales8(col_scales, per_channel, o, gs);
    LoadColumnScales8(col_scales, per_channel, inter + o, us);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float g = __bfloat162float(rg.e[j]) * rs * gs[j];
      float u = __bfloat162float(ru.e[j]) * rs * us[j];
      if (bias != nullptr) g += ToFloat(gb.e[j]), u += ToFloat(ub.e[j]);
      act.e[j] = FromFloat<T>(Silu(ToFloat(FromFloat<T>(g))) * ToFloat(FromFloat<T>(u)));
      amax = fmaxf(amax, fabsf(ToFloat(act.e[j])));
    }
    s_act[c] = act.bits;
  }
  // Each thread reads back only the chunks it wrote, so no barrier is needed when RowScale skips
  // its reduction.
  const float s = RowScale(amax, static_scale, out.row_scales);
  uint2* codes =
      reinterpret_cast<uint2*>(out.codes) + static_cast<std::int64_t>(blockIdx.x) * chunks;
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    Vec8<T> act;
    act.bits = s_act[c];
    codes[c] = ActivationCodes8(act, s);
  }
}

bool Aligned8(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 8 == 0;
}

}  // namespace

bool RmsNormFp8Takes(std::int64_t hidden, const void* x, const void* weight,
                     const std::uint8_t* codes) {
  return hidden > 0 && hidden % 8 == 0 && hidden <= std::int64_t{kNormMaxThreads} * 8 &&
         Aligned16(x) && Aligned16(weight) && Aligned8(codes);
}

cudaError_t RmsNormQuantFp8(Fp8Rows out, const void* x, const void* weight, DType dtype,
                            std::int64_t num_tokens, std::int64_t hidden, float eps,
                            float static_scale, cudaStream_t stream) {
  if (num_tokens < 0 || num_tokens > 0x7fffffff || out.row_scales == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (!RmsNormFp8Takes(hidden, x, weight, out.codes)) return cudaErrorNotSupported;
  if (num_tokens == 0) return cudaSuccess;
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    const int chunks = static_cast<int>(hidden / 8);
    return LaunchProgrammatic(RmsNormQuantKernel<T>, dim3(static_cast<unsigned>(num_tokens)),
                              dim3(static_cast<unsigned>(CeilDiv(chunks, 32) * 32)), 0, stream, out,
                              static_cast<const T*>(x), static_cast<const T*>(weight), chunks, eps,
                              static_scale);
  });
  return cudaErrorInvalidValue;
}

bool Fp8SwiGluCodesTakes(std::int64_t inter, const void* raw, const float* col_scales,
                         bool per_channel, const void* bias, const std::uint8_t* codes) {
  return inter > 0 && inter % 8 == 0 && inter <= kSwiGluMaxInter && Aligned16(raw) &&
         (!per_channel || Aligned16(col_scales)) && (bias == nullptr || Aligned16(bias)) &&
         Aligned8(codes);
}

cudaError_t Fp8GemmSwiGluEpilogueCodes(Fp8Rows out, const void* raw, const float* row_scales,
                                       const float* col_scales, bool per_channel, const void* bias,
                                       DType dtype, std::int64_t m, std::int64_t inter,
                                       float static_scale, cudaStream_t stream) {
  if (m < 0 || m > 0x7fffffff || out.row_scales == nullptr) return cudaErrorInvalidValue;
  if (!Fp8SwiGluCodesTakes(inter, raw, col_scales, per_channel, bias, out.codes)) {
    return cudaErrorNotSupported;
  }
  if (m == 0) return cudaSuccess;
  const auto smem = static_cast<std::size_t>(inter) * 2;  // fp16 / bf16
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    if (smem > (48 << 10)) {
      // NOTE: set at every such launch: the attribute belongs to the current device's context.
      const cudaError_t err =
          cudaFuncSetAttribute(SwiGluCodesKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem));
      if (err != cudaSuccess) return err;
    }
    return LaunchProgrammatic(SwiGluCodesKernel<T>, dim3(static_cast<unsigned>(m)), dim3(kThreads),
                              smem, stream, out, static_cast<const __nv_bfloat16*>(raw), row_scales,
                              col_scales, per_channel, static_cast<const T*>(bias),
                              static_cast<int>(inter), static_scale);
  });
  return cudaErrorInvalidValue;
}

}  // namespace inflight::kernels::cuda
