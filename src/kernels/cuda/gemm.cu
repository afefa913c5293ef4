#include "kernels/cuda/gemm.h"

#include "kernels/cuda/gemv.h"

namespace inflight::kernels::cuda {
namespace {

cudaDataType_t CudaType(DType t) {
  switch (t) {
    case DType::kFloat16:
      return CUDA_R_16F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

// The largest power of two (up to 256) dividing the address: cuBLASLt's heuristics must know it.
int Alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  int align = 256;
  while (align > 1 && (a % static_cast<std::uintptr_t>(align)) != 0) align >>= 1;
  return align;
}

}  // namespace

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

CublasLtGemm::CublasLtGemm(std::size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  init_status_ = cublasLtCreate(&handle_);
  if (init_status_ != CUBLAS_STATUS_SUCCESS) return;
  if (workspace_bytes_ > 0 && cudaMalloc(&workspace_, workspace_bytes_) != cudaSuccess) {
    workspace_ = nullptr;
    init_status_ = CUBLAS_STATUS_ALLOC_FAILED;
  }
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

std::size_t CublasLtGemm::num_cached_plans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

// Row-major y[m, n] = x[m, k] · w[n, k]ᵀ is column-major yᵀ[n, m] = w (as k x n, transposed) ·
// xᵀ (k x m): A = w with op T, B = x, C = D = y, all in cuBLAS's column-major terms.
cublasStatus_t CublasLtGemm::MakePlan(const PlanKey& key, Plan* plan) {
  const auto [m, n, k, x_stride, y_stride, dtype_i, y_dtype_i, has_bias, align, sms] = key;
  const cudaDataType_t in_type = CudaType(static_cast<DType>(dtype_i));
  const cudaDataType_t out_type = CudaType(static_cast<DType>(y_dtype_i));
  cublasStatus_t st = cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t));
  cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n));
  if (sms > 0) {
    const std::int32_t target = sms;
    cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &target,
                                   sizeof(target));
  }
  if (has_bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &out_type,
                                   sizeof(out_type));
  }
  if ((st = cublasLtMatrixLayoutCreate(&plan->a, in_type, static_cast<std::uint64_t>(k),
                                       static_cast<std::uint64_t>(n), k)) !=
          CUBLAS_STATUS_SUCCESS ||
      (st = cublasLtMatrixLayoutCreate(&plan->b, in_type, static_cast<std::uint64_t>(k),
                                       static_cast<std::uint64_t>(m), x_stride)) !=
          CUBLAS_STATUS_SUCCESS ||
      (st = cublasLtMatrixLayoutCreate(&plan->c, out_type, static_cast<std::uint64_t>(n),
                                       static_cast<std::uint64_t>(m), y_stride)) !=
          CUBLAS_STATUS_SUCCESS) {
    return st;
  }
  cublasLtMatmulPreference_t pref = nullptr;
  if ((st = cublasLtMatmulPreferenceCreate(&pref)) != CUBLAS_STATUS_SUCCESS) return st;
  const std::uint64_t ws = workspace_bytes_;
  const std::uint32_t al = static_cast<std::uint32_t>(align);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al,
                                       sizeof(al));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al,
                                       sizeof(al));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al,
                                       sizeof(al));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al,
                                       sizeof(al));
  // NOTE: split-K's in-place and output-type reductions sum the partials in the output dtype;
  // with bf16 outputs that loses ~3 bits against the fp32 accumulation this class promises.
  const std::uint32_t reduction_mask =
      CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                       &reduction_mask, sizeof(reduction_mask));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, pref,
                                      1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (found == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  plan->algo = result.algo;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CublasLtGemm::Linear(void* y, DType y_dtype, std::int64_t y_stride, const void* x,
                                    std::int64_t x_stride, const void* w, const void* bias,
                                    DType dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                                    cudaStream_t stream) {
  return Matmul(y, y_dtype, y_stride, x, x_stride, w, bias, dtype, m, n, k, false, stream);
}

cublasStatus_t CublasLtGemm::LinearAdd(void* y, DType y_dtype, std::int64_t y_stride, const void* x,
                                       std::int64_t x_stride, const void* w, const void* bias,
                                       DType dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                                       cudaStream_t stream) {
  return Matmul(y, y_dtype, y_stride, x, x_stride, w, bias, dtype, m, n, k, true, stream);
}

cublasStatus_t CublasLtGemm::Matmul(void* y, DType y_dtype, std::int64_t y_stride, const void* x,
                                    std::int64_t x_stride, const void* w, const void* bias,
                                    DType dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                                    bool accumulate, cudaStream_t stream) {
  if (init_status_ != CUBLAS_STATUS_SUCCESS) return init_status_;
  if (m < 0 || n <= 0 || k <= 0 || x_stride < k || y_stride < n) return CUBLAS_STATUS_INVALID_VALUE;
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16) return CUBLAS_STATUS_INVALID_VALUE;
  if (y_dtype != dtype && y_dtype != DType::kFloat32) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0) return CUBLAS_STATUS_SUCCESS;
  if (small_m_kernel_) {
    // Gemv checks what it takes and answers cudaErrorNotSupported for the rest.
    const cudaError_t err =
        Gemv(y, y_dtype, y_stride, x, x_stride, w, bias, dtype, m, n, k, accumulate, stream);
    if (err == cudaSuccess) return CUBLAS_STATUS_SUCCESS;
    if (err != cudaErrorNotSupported) return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  int align = std::min(std::min(Alignment(x), Alignment(w)), Alignment(y));
  if (bias != nullptr) align = std::min(align, Alignment(bias));
  const PlanKey key{m,
                    n,
                    k,
                    x_stride,
                    y_stride,
                    static_cast<int>(dtype),
                    static_cast<int>(y_dtype),
                    bias != nullptr,
                    align,
                    sm_count_target_};
  Plan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      auto fresh = std::make_unique<Plan>();
      const cublasStatus_t st = MakePlan(key, fresh.get());
      if (st != CUBLAS_STATUS_SUCCESS) return st;
      it = plans_.emplace(key, std::move(fresh)).first;
    }
    plan = it->second.get();
  }
  if (bias != nullptr) {
    cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                   sizeof(bias));
  }
  // In place (C == D, one layout) is cuBLASLt's documented form of an accumulating matmul.
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return cublasLtMatmul(handle_, plan->desc, &alpha, w, plan->a, x, plan->b, &beta, y, plan->c, y,
                        plan->c, &plan->algo, workspace_, workspace_bytes_, stream);
}

}  // namespace inflight::kernels::cuda
