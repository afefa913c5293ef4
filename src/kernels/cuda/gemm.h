// Dense layers through cuBLASLt: y = x · Wᵀ (+ bias) or y += x · Wᵀ (+ bias), fp16/bf16 inputs,
// fp32 accumulation, the algorithm picked once per shape and cached; steps of at most kGemvMaxRows
// rows go to our own weight-streaming kernel (kernels/cuda/gemv.h) where it takes them. CUDA twin
// of kernels/cpu/linear.h.
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

class CublasLtGemm {
 public:
  // Creates the cuBLASLt handle and a workspace of workspace_bytes on the current device.
  // Check status() before use.
  explicit CublasLtGemm(std::size_t workspace_bytes = std::size_t{32} << 20);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  cublasStatus_t status() const { return init_status_; }

  // y[t, o] = sum_i x[t, i] * w[o, i] (+ bias[o]) for t < m, o < n, i < k; fp32 accumulation.
  // x: device [m, k] with row stride x_stride >= k; w: device [n, k] contiguous (the engine's
  // [out_features, in_features]); bias: device [n] or nullptr, in y_dtype (fused into the
  // epilogue); y: device [m, n] with row stride y_stride >= n. dtype (x and w): fp16 or bf16;
  // y_dtype: dtype or fp32 (logits). Returns CUBLAS_STATUS_NOT_SUPPORTED when no algorithm fits.
  cublasStatus_t Linear(void* y, DType y_dtype, std::int64_t y_stride, const void* x,
                        std::int64_t x_stride, const void* w, const void* bias, DType dtype,
                        std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t stream);

  // y[t, o] += sum_i x[t, i] * w[o, i] (+ bias[o]): Linear with y's old values added in the
  // epilogue (beta = 1, y read and written in place), so that a residual stream takes a layer's
  // output without a separate pass over both. Same arguments and rules as Linear.
  cublasStatus_t LinearAdd(void* y, DType y_dtype, std::int64_t y_stride, const void* x,
                           std::int64_t x_stride, const void* w, const void* bias, DType dtype,
                           std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t stream);

  // Off: every call goes to cuBLASLt (the benchmark compares the two paths).
  void set_small_m_kernel(bool on) { small_m_kernel_ = on; }

  // Plans made from here on ask cuBLASLt for kernels that use at most `sms` multiprocessors
  // (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), leaving the rest to work on another stream; 0: all.
  void set_sm_count_target(int sms) { sm_count_target_ = sms; }

  // Plans made so far (one per distinct shape, dtype, bias, pointer alignment and SM target).
  std::size_t num_cached_plans() const;

 private:
  struct Plan;
  using PlanKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                             int, int, bool, int, int>;
  cublasStatus_t MakePlan(const PlanKey& key, Plan* plan);
  cublasStatus_t Matmul(void* y, DType y_dtype, std::int64_t y_stride, const void* x,
                        std::int64_t x_stride, const void* w, const void* bias, DType dtype,
                        std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate,
                        cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  cublasStatus_t init_status_ = CUBLAS_STATUS_NOT_INITIALIZED;
  bool small_m_kernel_ = true;
  int sm_count_target_ = 0;
  mutable std::mutex mutex_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

}  // namespace inflight::kernels::cuda
