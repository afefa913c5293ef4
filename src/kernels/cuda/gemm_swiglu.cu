#include "kernels/cuda/gemm_swiglu.h"

#include "kernels/cuda/gemm_swiglu_kernel.cuh"

namespace inflight::kernels::cuda {
namespace {

namespace sg = swiglu_gemm;

// out = silu(g) u in T. Rounding g and u to T first (the staging) matches the separate path: a
// T-typed gate_up layer, then the SwiGLU kernel.
template <typename T>
struct SwiGluOut {
  using Operand = T;
  using Staged = T;
  T* out;
  std::int64_t out_stride;

  __device__ __forceinline__ void Finish8(const Vec8<T>& g, const Vec8<T>& u, int row,
                                          int col) const {
    Vec8<T> o;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float gj = ToFloat(g.e[j]);
      // NOTE: approximate exp and division. With expf and an IEEE division (~5x the
      // instructions) these warps slowed the wgmmas beside them by 3% at 8192 rows on an H200;
      // the error they add is far below T's rounding. For g below ~-88 the quotient is -0.
      o.e[j] = FromFloat<T>(__fdividef(gj, 1.0f + __expf(-gj)) * ToFloat(u.e[j]));
    }
    *reinterpret_cast<uint4*>(out + static_cast<std::int64_t>(row) * out_stride + col) = o.bits;
  }
};

}  // namespace

bool GemmSwiGluSupports(DType dtype, std::int64_t m, std::int64_t inter, std::int64_t k,
                        const void* x, std::int64_t x_stride, const void* w, const void* out,
                        std::int64_t out_stride) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 31;
  if (dtype != DType::kBFloat16 && dtype != DType::kFloat16) return false;
  if (m < 1 || m >= kLimit || inter < sg::kCols || inter % sg::kCols != 0 || 2 * inter >= kLimit) {
    return false;
  }
  if (k < 8 || k % 8 != 0 || k >= kLimit || x_stride < k || x_stride % 8 != 0) return false;
  if (out_stride < inter || out_stride % 8 != 0) return false;
  if (!Aligned16(x) || !Aligned16(w) || !Aligned16(out)) return false;
  return dtype == DType::kBFloat16 ? sg::KernelRunnable<SwiGluOut<__nv_bfloat16>>()
                                   : sg::KernelRunnable<SwiGluOut<__half>>();
}

cudaError_t GemmSwiGlu(void* out, std::int64_t out_stride, const void* x, std::int64_t x_stride,
                       const void* w, DType dtype, std::int64_t m, std::int64_t inter,
                       std::int64_t k, cudaStream_t stream) {
  if (!GemmSwiGluSupports(dtype, m, inter, k, x, x_stride, w, out, out_stride)) {
    return cudaErrorNotSupported;
  }
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    return sg::Launch(SwiGluOut<T>{static_cast<T*>(out), out_stride}, x, x_stride, w, m, inter, k,
                      stream);
  });
  return cudaErrorNotSupported;
}

}  // namespace inflight::kernels::cuda
