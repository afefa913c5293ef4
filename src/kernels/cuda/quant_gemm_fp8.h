// W8A8 FP8 linears at prompt sizes through cuBLASLt's FP8 GEMM (E4M3 x E4M3, fp32 accumulation,
// sm_89+): the products of the codes come out unscaled in bf16, then one epilogue pass applies the
// token row's activation scale and the output channel's weight scale, the bias, and the residual.
// The scales can also go to cuBLASLt itself (MultiplyScaled), which saves the epilogue's pass over
// the output: one scalar for the weights and one for the activations (a per-tensor weight under a
// static input_scale, the checkpoints ModelOpt and llm-compressor publish) is the classic FP8 mode
// every FP8 device has; outer-vector scales (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, cuBLAS
// 12.9+) for the other layouts were not offered on sm_90 by CUDA 13.0's cuBLASLt (2026-11-29), so
// they are opt-in (QuantLinear::set_fp8_outer_vector_scales).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

class CublasLtFp8Gemm {
 public:
  // Creates a cuBLASLt handle and a workspace on the current device. Check status() before use.
  explicit CublasLtFp8Gemm(std::size_t workspace_bytes = std::size_t{32} << 20);
  ~CublasLtFp8Gemm();
  CublasLtFp8Gemm(const CublasLtFp8Gemm&) = delete;
  CublasLtFp8Gemm& operator=(const CublasLtFp8Gemm&) = delete;

  cublasStatus_t status() const { return init_status_; }
  // Whether the current device has FP8 tensor cores (compute capability 8.9 or later).
  static bool DeviceSupportsFp8();

  // raw[t, o] = sum_i e4m3(x_codes[t, i]) * e4m3(w_codes[o, i]) in fp32, stored as bf16.
  // x_codes: device [m, k] contiguous; w_codes: device [n, k] contiguous; raw: device [m, n]
  // contiguous bf16. k a multiple of 16, n of 8 (quant_linear_path.h QuantFp8GemmTakes).
  // CUBLAS_STATUS_NOT_SUPPORTED where the library offers no kernel (remembered per shape).
  cublasStatus_t Multiply(void* raw, const std::uint8_t* x_codes, const std::uint8_t* w_codes,
                          std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t stream);

  // Whether Multiply has a kernel for this shape (asks the library once per shape).
  bool Offers(std::int64_t m, std::int64_t n, std::int64_t k);

  // How MultiplyScaled takes its scales: each a device fp32 scalar ([1]) or an outer vector.
  struct ScaleModes {
    bool per_channel = false;  // col_scales [n] (else [1])
    bool row_vector = true;    // row_scales [m] (else [1]: one static scale for every row)
    bool operator<(const ScaleModes& o) const {
      return per_channel != o.per_channel ? per_channel < o.per_channel : row_vector < o.row_vector;
    }
  };
  // The whole linear in one call: y[t, o] = row_scales[t or 0] * col_scales[o or 0] * sum_i x·w
  // (+ bias[o]) (+ y[t, o] when accumulate), the scaled fp32 sum rounded once to dtype (fp16 /
  // bf16); y [m, n] with rows y_stride >= n elements apart (a column block of a wider output).
  // CUBLAS_STATUS_NOT_SUPPORTED where the library offers no such kernel (remembered per shape) or
  // y, x_codes, w_codes or bias is not 256-byte aligned.
  cublasStatus_t MultiplyScaled(void* y, std::int64_t y_stride, DType dtype,
                                const std::uint8_t* x_codes, const float* row_scales,
                                const std::uint8_t* w_codes, const float* col_scales,
                                ScaleModes modes, const void* bias, std::int64_t m, std::int64_t n,
                                std::int64_t k, bool accumulate, cudaStream_t stream);
  // Whether p meets the alignment MultiplyScaled's plans are made for (cuBLASLt's default, 256
  // bytes): y, x_codes, w_codes and bias must.
  static bool Aligned256(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 256 == 0; }
  // Whether MultiplyScaled has a kernel for these arguments (asks the library once per shape);
  // y_stride 0: n.
  bool OffersScaled(DType dtype, std::int64_t m, std::int64_t n, std::int64_t k, ScaleModes modes,
                    bool has_bias, std::int64_t y_stride = 0);

 private:
  struct Plan;
  // m, n, k; then for MultiplyScaled (else -1, {}, false, n): output dtype, scale modes, bias,
  // output row stride.
  using PlanKey =
      std::tuple<std::int64_t, std::int64_t, std::int64_t, int, ScaleModes, bool, std::int64_t>;
  cublasStatus_t MakePlan(const PlanKey& key, Plan* plan);
  // The cached plan of `key`, made on first use; null with the status that stopped it.
  Plan* FindPlan(const PlanKey& key, cublasStatus_t* status);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  cublasStatus_t init_status_ = CUBLAS_STATUS_NOT_INITIALIZED;
  std::mutex mutex_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

// y[t, o] = raw[t, o] * row_scales[t] * col_scales[per_channel ? o : 0] (+ bias[o]) (+ y[t, o] when
// accumulate), rounded once to dtype (fp16 / bf16). raw: device [m, n] bf16 contiguous; row_scales:
// device [m] fp32; col_scales: device [n] or [1] fp32; bias: device [n] in dtype or null; y: device
// [m, n] in dtype with row stride y_stride.
cudaError_t Fp8GemmEpilogue(void* y, std::int64_t y_stride, const void* raw,
                            const float* row_scales, const float* col_scales, bool per_channel,
                            const void* bias, DType dtype, std::int64_t m, std::int64_t n,
                            bool accumulate, cudaStream_t stream);

// The gate/up linear's epilogue fused with SwiGLU: act[t, o] = silu(g) * u for o < inter, g and u
// being what Fp8GemmEpilogue would write at columns o and inter + o of raw [m, 2 * inter] (gate
// columns first), each rounded to dtype, so the result has the bits of Fp8GemmEpilogue then
// SwiGlu. act: device [m, inter] in dtype, row stride act_stride; col_scales: [2 * inter] or [1];
// bias: [2 * inter] in dtype or null. cudaErrorNotSupported where Fp8SwiGluEpilogueTakes is false.
cudaError_t Fp8GemmSwiGluEpilogue(void* act, std::int64_t act_stride, const void* raw,
                                  const float* row_scales, const float* col_scales,
                                  bool per_channel, const void* bias, DType dtype, std::int64_t m,
                                  std::int64_t inter, cudaStream_t stream);
// Whether the fused pass takes these arguments: inter and act_stride multiples of 8, 16-byte
// aligned act, raw, per-channel scales and bias.
bool Fp8SwiGluEpilogueTakes(std::int64_t act_stride, const void* act, const void* raw,
                            const float* col_scales, bool per_channel, const void* bias,
                            std::int64_t inter);

}  // namespace inflight::kernels::cuda
