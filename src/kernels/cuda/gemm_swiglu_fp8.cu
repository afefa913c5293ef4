#include "kernels/cuda/gemm_swiglu_fp8.h"

#include <cmath>

#include "kernels/cuda/gemm_swiglu_kernel.cuh"
#include "kernels/cuda/quant_codes.cuh"

namespace inflight::kernels::cuda {
namespace {

namespace sg = swiglu_gemm;

// The accumulators rounded to bf16 (the unscaled products cuBLASLt writes on the separate path),
// then Fp8GemmSwiGluEpilogueCodes's arithmetic under a static scale: the same bits given the same
// sums.
template <typename T>
struct SwiGluCodes {
  using Operand = std::uint8_t;
  using Staged = __nv_bfloat16;
  std::uint8_t* codes;
  float* out_row_scales;
  const float* x_row_scales;
  const float* col_scales;
  bool per_channel;
  int inter;
  float out_scale;

  __device__ __forceinline__ void Finish8(const Vec8<__nv_bfloat16>& g,
                                          const Vec8<__nv_bfloat16>& u, int row, int col) const {
    const float rs = x_row_scales[row];
    float gs[8], us[8];
    LoadColumnScales8(col_scales, per_channel, col, gs);
    LoadColumnScales8(col_scales, per_channel, inter + col, us);
    Vec8<T> act;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float gv = __bfloat162float(g.e[j]) * rs * gs[j];
      const float uv = __bfloat162float(u.e[j]) * rs * us[j];
      act.e[j] = FromFloat<T>(Silu(ToFloat(FromFloat<T>(gv))) * ToFloat(FromFloat<T>(uv)));
    }
    const std::int64_t at = static_cast<std::int64_t>(row) * inter + col;
    *reinterpret_cast<uint2*>(codes + at) = ActivationCodes8(act, out_scale);
    if (col == 0) out_row_scales[row] = out_scale;
  }
};

bool Aligned8(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 8 == 0;
}

}  // namespace

bool GemmSwiGluFp8Supports(DType dtype, std::int64_t m, std::int64_t inter, std::int64_t k,
                           const Fp8Rows& x, const std::uint8_t* w, const float* col_scales,
                           bool per_channel, float out_scale, const Fp8Rows& out) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 31;
  if (dtype != DType::kBFloat16 && dtype != DType::kFloat16) return false;
  if (m < 1 || m >= kLimit || inter < sg::kCols || inter % sg::kCols != 0 || 2 * inter >= kLimit ||
      m * inter >= kLimit) {
    return false;
  }
  if (k < 16 || k % 16 != 0 || k >= kLimit) return false;
  if (!(out_scale > 0.0f) || !std::isfinite(out_scale)) return false;
  if (x.row_scales == nullptr || out.row_scales == nullptr || col_scales == nullptr) return false;
  if (!Aligned16(x.codes) || !Aligned16(w) || !Aligned8(out.codes) ||
      (per_channel && !Aligned16(col_scales))) {
    return false;
  }
  return dtype == DType::kBFloat16 ? sg::KernelRunnable<SwiGluCodes<__nv_bfloat16>>()
                                   : sg::KernelRunnable<SwiGluCodes<__half>>();
}

cudaError_t GemmSwiGluFp8(Fp8Rows out, float out_scale, Fp8Rows x, const std::uint8_t* w,
                          const float* col_scales, bool per_channel, DType dtype, std::int64_t m,
                          std::int64_t inter, std::int64_t k, cudaStream_t stream) {
  if (!GemmSwiGluFp8Supports(dtype, m, inter, k, x, w, col_scales, per_channel, out_scale, out)) {
    return cudaErrorNotSupported;
  }
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    const SwiGluCodes<T> epi{out.codes,   out.row_scales,          x.row_scales, col_scales,
                             per_channel, static_cast<int>(inter), out_scale};
    return sg::Launch(epi, x.codes, k, w, m, inter, k, stream);
  });
  return cudaErrorNotSupported;
}

}  // namespace inflight::kernels::cuda
