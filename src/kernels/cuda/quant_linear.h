// One entry point for a quantized linear (quant_weight.h) of any format and row count: it picks the
// path (quant_linear_path.h) and runs it. For fp8 it first quantizes the input rows to E4M3 in
// place, as the CPU reference does (kernels/cpu/fp8_activation.h), so every path computes
// sum_i e4m3(x_i / s) * s * w_i. Queued on the stream with no allocation and no host
// synchronisation (CUDA graphs capture it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>

#include "common/dtype.h"
#include "kernels/cuda/fp8_activation_producers.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/quant_gemm_fp8.h"
#include "kernels/cuda/quant_linear_path.h"
#include "kernels/cuda/quant_weight.h"

namespace inflight::kernels::cuda {

// Device scratch the paths use (quant_linear_path.h QuantLinearScratchBytes gives the sizes).
struct QuantScratch {
  void* weight = nullptr;  // kDequantGemm: [n, k] in the activation dtype; kMixedGemm: partials
  std::int64_t weight_bytes = 0;
  std::uint8_t* act_codes = nullptr;  // kFp8Gemm: [m, k] E4M3
  std::int64_t act_codes_bytes = 0;
  float* act_scales = nullptr;  // kFp8Gemm: [m]
  std::int64_t act_scales_bytes = 0;
  void* raw_out = nullptr;  // kFp8Gemm: [m, n] bf16
  std::int64_t raw_out_bytes = 0;
};

class QuantLinear {
 public:
  // gemm: the float GEMM of the fallback path; fp8_gemm: null where the device has no FP8 GEMM.
  // Both outlive this object. Prepares the current device's GEMV and mixed GEMM kernels
  // (QuantGemvPrepareDevice, QuantMixedGemmPrepareDevice): construct it outside a CUDA graph
  // capture, and check prepare_status().
  QuantLinear(CublasLtGemm& gemm, CublasLtFp8Gemm* fp8_gemm);

  cudaError_t prepare_status() const { return prepare_status_; }

  // The path Run takes for these arguments (the forced one where it applies).
  QuantLinearPath PathFor(const QuantWeight& w, DType dtype, std::int64_t m, std::int64_t n,
                          std::int64_t k, const void* x, std::int64_t x_stride) const;

  // y[t, o] = sum_i x[t, i] * w(o, i) (+ bias[o]) (+ y[t, o] when accumulate) for t < m, o < n.
  // x: device [m, k] in dtype (fp16 / bf16), row stride x_stride; fp8: its rows may be replaced
  // by their E4M3 rounding (QuantizeActivationsFp8 with w.input_scale; the GEMV and dequantizing
  // paths do, the FP8 GEMM does not), so the caller must not read x afterwards. bias: device [n] in
  // dtype or null; y: device [m, n] in dtype, row stride y_stride. Errors: cudaErrorNotSupported
  // when the scratch is too small for the path; a cuBLASLt failure comes back as cudaErrorUnknown.
  cudaError_t Run(void* y, std::int64_t y_stride, void* x, std::int64_t x_stride,
                  const QuantWeight& w, const void* bias, DType dtype, std::int64_t m,
                  std::int64_t n, std::int64_t k, bool accumulate, const QuantScratch& scratch,
                  cudaStream_t stream);

  // The gate/up linear and SwiGLU at once: act[t, o] = silu(g) * u for o < inter, where [g | u] =
  // x · wᵀ (+ bias) with w [2 * inter, k] (gate rows first). The FP8 GEMM's epilogue writes act
  // straight from the products (the [m, 2 * inter] outputs never go to memory), with the bits of
  // Run then SwiGlu. act: device [m, inter] contiguous. cudaErrorNotSupported, having done
  // nothing, unless Run would take kFp8Gemm here and Fp8SwiGluEpilogueTakes the pointers: the
  // caller then runs Run and SwiGlu. x as Run's.
  cudaError_t RunSwiGlu(void* act, void* x, std::int64_t x_stride, const QuantWeight& w,
                        const void* bias, DType dtype, std::int64_t m, std::int64_t inter,
                        std::int64_t k, const QuantScratch& scratch, cudaStream_t stream);

  // Whether RunFp8Rows (n outputs) and RunSwiGluFp8Rows (n = 2 * inter) take these arguments: Run
  // would take kFp8Gemm (x, x_stride: where Run's input would be) and the library has an FP8
  // kernel for each chunk of rows the scratch holds. Asks the library once per shape.
  bool TakesFp8Rows(const QuantWeight& w, DType dtype, std::int64_t m, std::int64_t n,
                    std::int64_t k, const void* x, std::int64_t x_stride,
                    const QuantScratch& scratch) const;

  // Run with its input already quantized by the kernel that produced it
  // (fp8_activation_producers.h: x.codes [m, k] and x.row_scales [m] under w.input_scale's rule):
  // the bits Run gives for the rows those codes came from. The caller asks TakesFp8Rows first;
  // cudaErrorNotSupported, having done nothing, where the FP8 GEMM cannot run these rows.
  cudaError_t RunFp8Rows(void* y, std::int64_t y_stride, Fp8Rows x, const QuantWeight& w,
                         const void* bias, DType dtype, std::int64_t m, std::int64_t n,
                         std::int64_t k, bool accumulate, const QuantScratch& scratch,
                         cudaStream_t stream);

  // RunSwiGlu from codes, its act rows going out as codes as well (act.codes [m, inter], under
  // act_static_scale's rule: the next linear's input_scale): the bits of RunSwiGlu then
  // QuantizeActivationsFp8. The caller asks TakesFp8Rows (n = 2 * inter) first;
  // cudaErrorNotSupported, having done nothing, where the FP8 GEMM cannot run these rows or
  // Fp8SwiGluCodesTakes is false.
  cudaError_t RunSwiGluFp8Rows(Fp8Rows act, float act_static_scale, Fp8Rows x, const QuantWeight& w,
                               const void* bias, DType dtype, std::int64_t m, std::int64_t inter,
                               std::int64_t k, const QuantScratch& scratch, cudaStream_t stream);

  // Tests and benchmarks: every call takes `path` where its preconditions hold (nullopt: the
  // rule).
  void force_path(std::optional<QuantLinearPath> path) { forced_ = path; }
  // kFp8Gemm: the scales applied by cuBLASLt itself (CublasLtFp8Gemm::MultiplyScaled) where it
  // offers that, instead of the epilogue kernel. Off by default: CUDA 13.0's cuBLASLt offered no
  // outer-vector scales on sm_90.
  void set_fp8_outer_vector_scales(bool on) { fp8_outer_vector_ = on; }
  // kFp8Gemm of a per-tensor weight (or one of scalar runs: a GEMM a run) under a static
  // input_scale: both scales go to cuBLASLt as scalars, and the output is written once, rounded
  // once from the fp32 sums (no products in bf16, no epilogue pass). On by default; off gives the
  // epilogue's bits (tests, benchmarks).
  void set_fp8_scalar_scales(bool on) { fp8_scalar_scales_ = on; }

 private:
  // kFp8Gemm over the rows in chunks the scratch holds (the dequantizing path takes over where the
  // library has no FP8 kernel for the shape). swiglu: RunSwiGlu's epilogue (y is act, n = 2 *
  // inter, y_stride = inter).
  cudaError_t RunFp8Gemm(void* y, std::int64_t y_stride, void* x, std::int64_t x_stride,
                         const QuantWeight& w, const void* bias, DType dtype, std::int64_t m,
                         std::int64_t n, std::int64_t k, bool accumulate, bool swiglu,
                         const QuantScratch& scratch, cudaStream_t stream);
  // An FP8 weight whose GEMM the library runs for each chunk of m rows the scratch holds.
  bool Fp8ChunksOffered(const QuantWeight& w, std::int64_t m, std::int64_t n, std::int64_t k,
                        const QuantScratch& scratch) const;
  // The scale modes under which MultiplyScaled runs w's GEMM (nullopt: the epilogue kernel's
  // way).
  std::optional<CublasLtFp8Gemm::ScaleModes> CublasLtScales(const QuantWeight& w) const;
  // MultiplyScaled of x's codes and row scales by w, in one call, or one a run of w's rows for a
  // weight of scalar runs (all of them or none: CUBLAS_STATUS_NOT_SUPPORTED, having written
  // nothing, where the library takes some run not).
  cublasStatus_t MultiplyScaledRuns(void* y, std::int64_t y_stride, DType dtype,
                                    const std::uint8_t* x_codes, const float* row_scales,
                                    const QuantWeight& w, CublasLtFp8Gemm::ScaleModes modes,
                                    const void* bias, std::int64_t m, std::int64_t n,
                                    std::int64_t k, bool accumulate, cudaStream_t stream);
  // RunFp8Rows and RunSwiGluFp8Rows, each chunk of rows: `scaled(t0, mt)` (the whole linear,
  // MultiplyScaled), or where that gives CUBLAS_STATUS_NOT_SUPPORTED the unscaled GEMM then
  // `epilogue(t0, mt)`.
  template <typename Scaled, typename Epilogue>
  cudaError_t RunFp8RowChunks(const Fp8Rows& x, const QuantWeight& w, std::int64_t m,
                              std::int64_t n, std::int64_t k, const QuantScratch& scratch,
                              cudaStream_t stream, Scaled&& scaled, Epilogue&& epilogue);
  // kDequantGemm on inputs already rounded to E4M3 for fp8.
  cudaError_t RunDequantGemm(void* y, std::int64_t y_stride, const void* x, std::int64_t x_stride,
                             const QuantWeight& w, const void* bias, DType dtype, std::int64_t m,
                             std::int64_t n, std::int64_t k, bool accumulate,
                             const QuantScratch& scratch, cudaStream_t stream);

  CublasLtGemm& gemm_;
  CublasLtFp8Gemm* fp8_gemm_;
  int max_shared_bytes_ = 0;
  std::optional<QuantLinearPath> forced_;
  bool fp8_outer_vector_ = false;
  bool fp8_scalar_scales_ = true;
  cudaError_t prepare_status_ = cudaSuccess;
};

}  // namespace inflight::kernels::cuda
