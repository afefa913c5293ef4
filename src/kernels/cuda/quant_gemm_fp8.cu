#include "kernels/cuda/quant_gemm_fp8.h"

#include <algorithm>

#include "common/env_switch.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/quant_codes.cuh"

namespace inflight::kernels::cuda {
namespace {

// Whether the FP8 GEMMs accumulate the wgmma way (CUBLASLT_MATMUL_DESC_FAST_ACCUM), without
// cuBLASLt's periodic promotion of the partial sums to a separate fp32 accumulator: what
// TensorRT-LLM's FP8 GEMM sets (its thop fp8 gemm, fastAcc = 1) and what our own wgmma kernels
// (gemm_swiglu_fp8.h) do. INFLIGHT_FP8_FAST_ACCUM=0 turns it off, an A/B switch.
bool FastAccumulation() {
  static const bool on = EnvSwitchOn("INFLIGHT_FP8_FAST_ACCUM");
  return on;
}

constexpr int kThreads = 256;

// Grid: (min(ceil(m * n / kThreads), 65536)), Block: (kThreads); grid-stride.
template <typename T>
__global__ void Fp8EpilogueKernel(T* y, std::int64_t y_stride, const __nv_bfloat16* raw,
                                  const float* row_scales, const float* col_scales,
                                  bool per_channel, const T* bias, std::int64_t m, std::int64_t n,
                                  bool accumulate) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const std::int64_t total = m * n;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
       idx < total; idx += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t t = idx / n, o = idx - t * n;
    float v = __bfloat162float(raw[idx]) * row_scales[t] * col_scales[per_channel ? o : 0];
    if (bias != nullptr) v += ToFloat(bias[o]);
    T* out = y + t * y_stride + o;
    if (accumulate) v += ToFloat(*out);
    *out = FromFloat<T>(v);
  }
}

// The 8 biases from column o on as floats, 0 without a bias.
template <typename T>
__device__ __forceinline__ void LoadBias8(const T* bias, int o, float (&b)[8]) {
  Vec8<T> bv;
  if (bias != nullptr) bv.bits = *reinterpret_cast<const uint4*>(bias + o);
#pragma unroll
  for (int j = 0; j < 8; ++j) b[j] = bias != nullptr ? ToFloat(bv.e[j]) : 0.0f;
}

// 8 outputs (16 bytes) a thread, for n % 8 == 0 and 16-byte aligned rows, scales and bias: the
// scalar kernel above moves 2-byte elements with a 64-bit division each and took 0.5x as long as
// the FP8 GEMM it follows at 8192 x 4096 on an H200 (inflight-bench-gpu-quant). The same
// arithmetic in the same order, so both give the same bits. Grid: (ceil(n / 8 / kThreads),
// min(m, 65535)), Block: (kThreads); a row stride loop covers more rows than the grid's y.
template <typename T>
__global__ void Fp8EpilogueVec8Kernel(T* y, std::int64_t y_stride, const __nv_bfloat16* raw,
                                      const float* row_scales, const float* col_scales,
                                      bool per_channel, const T* bias, std::int64_t m, int n,
                                      bool accumulate) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const int o = (blockIdx.x * kThreads + threadIdx.x) * 8;
  if (o >= n) return;
  float cs[8], b[8];
  LoadColumnScales8(col_scales, per_channel, o, cs);
  LoadBias8(bias, o, b);
  for (std::int64_t t = blockIdx.y; t < m; t += gridDim.y) {
    Vec8<__nv_bfloat16> r;
    r.bits = *reinterpret_cast<const uint4*>(raw + t * n + o);
    T* out = y + t * y_stride + o;
    Vec8<T> old, v;
    if (accumulate) old.bits = *reinterpret_cast<const uint4*>(out);
    const float rs = row_scales[t];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float x = __bfloat162float(r.e[j]) * rs * cs[j];
      if (bias != nullptr) x += b[j];
      if (accumulate) x += ToFloat(old.e[j]);
      v.e[j] = FromFloat<T>(x);
    }
    *reinterpret_cast<uint4*>(out) = v.bits;
  }
}

// The gate/up linear's epilogue and SwiGLU in one pass: raw [m, 2 * inter] (gate columns, then up
// columns) to act [m, inter], so the [m, 2 * inter] outputs are never written and read back. g and
// u are rounded to T before the SiLU as the two unfused passes round them (the same bits). Grid:
// (ceil(inter / 8 / kThreads), min(m, 65535)), Block: (kThreads); a row stride loop as above.
template <typename T>
__global__ void Fp8SwiGluEpilogueVec8Kernel(T* act, std::int64_t act_stride,
                                            const __nv_bfloat16* raw, const float* row_scales,
                                            const float* col_scales, bool per_channel,
                                            const T* bias, std::int64_t m, int inter) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const int o = (blockIdx.x * kThreads + threadIdx.x) * 8;
  if (o >= inter) return;
  float gs[8], us[8], gb[8], ub[8];
  LoadColumnScales8(col_scales, per_channel, o, gs);
  LoadColumnScales8(col_scales, per_channel, inter + o, us);
  LoadBias8(bias, o, gb);
  LoadBias8(bias, inter + o, ub);
  for (std::int64_t t = blockIdx.y; t < m; t += gridDim.y) {
    const __nv_bfloat16* row = raw + t * 2 * static_cast<std::int64_t>(inter);
    Vec8<__nv_bfloat16> rg, ru;
    rg.bits = *reinterpret_cast<const uint4*>(row + o);
    ru.bits = *reinterpret_cast<const uint4*>(row + inter + o);
    const float rs = row_scales[t];
    Vec8<T> v;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float g = __bfloat162float(rg.e[j]) * rs * gs[j];
      float u = __bfloat162float(ru.e[j]) * rs * us[j];
      if (bias != nullptr) g += gb[j], u += ub[j];
      v.e[j] = FromFloat<T>(Silu(ToFloat(FromFloat<T>(g))) * ToFloat(FromFloat<T>(u)));
    }
    *reinterpret_cast<uint4*>(act + t * act_stride + o) = v.bits;
  }
}

// Whether the 8-wide epilogue kernels take these arguments: `cols` products a row (a multiple of 8,
// at most 2^30), an output row stride a multiple of 8, and 16-byte aligned output, products,
// per-channel scales and bias.
bool Vec8EpilogueTakes(std::int64_t cols, std::int64_t out_stride, const void* out, const void* raw,
                       const float* col_scales, bool per_channel, const void* bias) {
  return cols % 8 == 0 && out_stride % 8 == 0 && cols <= (std::int64_t{1} << 30) &&
         Aligned16(out) && Aligned16(raw) && (!per_channel || Aligned16(col_scales)) &&
         (bias == nullptr || Aligned16(bias));
}

cudaDataType_t OutType(int dtype) {
  return static_cast<DType>(dtype) == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
}

}  // namespace

struct CublasLtFp8Gemm::Plan {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;  // not SUCCESS: no algorithm (asked once)
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

CublasLtFp8Gemm::CublasLtFp8Gemm(std::size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  init_status_ = cublasLtCreate(&handle_);
  if (init_status_ != CUBLAS_STATUS_SUCCESS) return;
  if (workspace_bytes_ > 0 && cudaMalloc(&workspace_, workspace_bytes_) != cudaSuccess) {
    workspace_ = nullptr;
    init_status_ = CUBLAS_STATUS_ALLOC_FAILED;
  }
}

CublasLtFp8Gemm::~CublasLtFp8Gemm() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

bool CublasLtFp8Gemm::DeviceSupportsFp8() {
  const int major = CurrentDeviceAttribute(cudaDevAttrComputeCapabilityMajor, 0);
  const int minor = CurrentDeviceAttribute(cudaDevAttrComputeCapabilityMinor, 0);
  return major * 10 + minor >= 89;
}

// Row-major raw[m, n] = x[m, k] · w[n, k]ᵀ is column-major rawᵀ[n, m] = A · B with A = w (k x n,
// op T) and B = x (k x m, op N): the "TN" form cuBLASLt's FP8 GEMM requires.
cublasStatus_t CublasLtFp8Gemm::MakePlan(const PlanKey& key, Plan* plan) {
  const auto [m, n, k, scaled_dtype, modes, has_bias, ldc] = key;
  const bool scaled = scaled_dtype >= 0;
  const cudaDataType_t out_type = scaled ? OutType(scaled_dtype) : CUDA_R_16BF;
  cublasStatus_t st = cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t));
  cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n));
  const std::int8_t fast_accum = FastAccumulation() ? 1 : 0;
  cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum,
                                 sizeof(fast_accum));
  if (scaled) {
    // A (the weights, M = n channels): a vector of n, or the tensor's scalar; B (the activations,
    // N = m tokens): a vector of m, or the static scalar.
    const std::int32_t a_mode = modes.per_channel ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                  : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    const std::int32_t b_mode = modes.row_vector ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                 : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    if ((st = cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode,
                                             sizeof(a_mode))) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode,
                                             sizeof(b_mode))) != CUBLAS_STATUS_SUCCESS) {
      return st;
    }
    if (has_bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &out_type,
                                     sizeof(out_type));
    }
  }
  if ((st = cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_8F_E4M3, static_cast<std::uint64_t>(k),
                                       static_cast<std::uint64_t>(n), k)) !=
          CUBLAS_STATUS_SUCCESS ||
      (st = cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_8F_E4M3, static_cast<std::uint64_t>(k),
                                       static_cast<std::uint64_t>(m), k)) !=
          CUBLAS_STATUS_SUCCESS ||
      (st = cublasLtMatrixLayoutCreate(&plan->c, out_type, static_cast<std::uint64_t>(n),
                                       static_cast<std::uint64_t>(m), ldc)) !=
          CUBLAS_STATUS_SUCCESS) {
    return st;
  }
  cublasLtMatmulPreference_t pref = nullptr;
  if ((st = cublasLtMatmulPreferenceCreate(&pref)) != CUBLAS_STATUS_SUCCESS) return st;
  const std::uint64_t ws = workspace_bytes_;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  // NOTE: fp32 reductions only, as gemm.cu (bf16 split-K partials would lose bits).
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

CublasLtFp8Gemm::Plan* CublasLtFp8Gemm::FindPlan(const PlanKey& key, cublasStatus_t* status) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto fresh = std::make_unique<Plan>();
    fresh->status = MakePlan(key, fresh.get());
    it = plans_.emplace(key, std::move(fresh)).first;
  }
  *status = it->second->status;
  return it->second->status == CUBLAS_STATUS_SUCCESS ? it->second.get() : nullptr;
}

cublasStatus_t CublasLtFp8Gemm::Multiply(void* raw, const std::uint8_t* x_codes,
                                         const std::uint8_t* w_codes, std::int64_t m,
                                         std::int64_t n, std::int64_t k, cudaStream_t stream) {
  if (init_status_ != CUBLAS_STATUS_SUCCESS) return init_status_;
  if (m < 0 || n <= 0 || k <= 0 || k % 16 != 0 || n % 8 != 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0) return CUBLAS_STATUS_SUCCESS;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  // NOTE: any failure to make a plan means the library offers no kernel for it.
  Plan* plan = FindPlan(PlanKey{m, n, k, -1, ScaleModes{}, false, n}, &st);
  if (plan == nullptr) return CUBLAS_STATUS_NOT_SUPPORTED;
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(handle_, plan->desc, &alpha, w_codes, plan->a, x_codes, plan->b, &beta, raw,
                        plan->c, raw, plan->c, &plan->algo, workspace_, workspace_bytes_, stream);
}

bool CublasLtFp8Gemm::Offers(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (init_status_ != CUBLAS_STATUS_SUCCESS || m <= 0 || k % 16 != 0 || n % 8 != 0) return false;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  return FindPlan(PlanKey{m, n, k, -1, ScaleModes{}, false, n}, &st) != nullptr;
}

bool CublasLtFp8Gemm::OffersScaled(DType dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                                   ScaleModes modes, bool has_bias, std::int64_t y_stride) {
  if (y_stride == 0) y_stride = n;
  if (init_status_ != CUBLAS_STATUS_SUCCESS || m <= 0 || k % 16 != 0 || n % 8 != 0 ||
      y_stride < n) {
    return false;
  }
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  return FindPlan(PlanKey{m, n, k, static_cast<int>(dtype), modes, has_bias, y_stride}, &st) !=
         nullptr;
}

cublasStatus_t CublasLtFp8Gemm::MultiplyScaled(void* y, std::int64_t y_stride, DType dtype,
                                               const std::uint8_t* x_codes, const float* row_scales,
                                               const std::uint8_t* w_codes, const float* col_scales,
                                               ScaleModes modes, const void* bias, std::int64_t m,
                                               std::int64_t n, std::int64_t k, bool accumulate,
                                               cudaStream_t stream) {
  if (init_status_ != CUBLAS_STATUS_SUCCESS) return init_status_;
  if (m < 0 || n <= 0 || k <= 0 || k % 16 != 0 || n % 8 != 0 || y_stride < n) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0) return CUBLAS_STATUS_SUCCESS;
  // NOTE: the plans are asked for with cuBLASLt's default alignment (256 bytes); a row chunk of an
  // output whose rows are not a multiple of that apart takes the caller's other way.
  if (!Aligned256(y) || !Aligned256(x_codes) || !Aligned256(w_codes) ||
      (bias != nullptr && !Aligned256(bias))) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  Plan* plan =
      FindPlan(PlanKey{m, n, k, static_cast<int>(dtype), modes, bias != nullptr, y_stride}, &st);
  if (plan == nullptr) return CUBLAS_STATUS_NOT_SUPPORTED;
  // NOTE: the pointers are set per call on the cached descriptor, as gemm.cu's bias: one stream
  // uses a plan at a time (the runner's), and cublasLtMatmul reads them when it is called.
  cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &col_scales,
                                 sizeof(col_scales));
  cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &row_scales,
                                 sizeof(row_scales));
  if (bias != nullptr) {
    cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                   sizeof(bias));
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return cublasLtMatmul(handle_, plan->desc, &alpha, w_codes, plan->a, x_codes, plan->b, &beta, y,
                        plan->c, y, plan->c, &plan->algo, workspace_, workspace_bytes_, stream);
}

cudaError_t Fp8GemmEpilogue(void* y, std::int64_t y_stride, const void* raw,
                            const float* row_scales, const float* col_scales, bool per_channel,
                            const void* bias, DType dtype, std::int64_t m, std::int64_t n,
                            bool accumulate, cudaStream_t stream) {
  if (m < 0 || n <= 0 || y_stride < n) return cudaErrorInvalidValue;
  if (m == 0) return cudaSuccess;
  const bool vec8 = Vec8EpilogueTakes(n, y_stride, y, raw, col_scales, per_channel, bias);
  const auto blocks =
      static_cast<unsigned>(std::min<std::int64_t>(CeilDiv(m * n, kThreads), 65536));
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    if (vec8) {
      const dim3 grid(static_cast<unsigned>(CeilDiv(n / 8, kThreads)),
                      static_cast<unsigned>(std::min<std::int64_t>(m, 65535)));
      return LaunchProgrammatic(
          Fp8EpilogueVec8Kernel<T>, grid, dim3(kThreads), 0, stream, static_cast<T*>(y), y_stride,
          static_cast<const __nv_bfloat16*>(raw), row_scales, col_scales, per_channel,
          static_cast<const T*>(bias), m, static_cast<int>(n), accumulate);
    }
    return LaunchProgrammatic(Fp8EpilogueKernel<T>, dim3(blocks), dim3(kThreads), 0, stream,
                              static_cast<T*>(y), y_stride, static_cast<const __nv_bfloat16*>(raw),
                              row_scales, col_scales, per_channel, static_cast<const T*>(bias), m,
                              n, accumulate);
  });
  return cudaErrorInvalidValue;
}

bool Fp8SwiGluEpilogueTakes(std::int64_t act_stride, const void* act, const void* raw,
                            const float* col_scales, bool per_channel, const void* bias,
                            std::int64_t inter) {
  // NOTE: inter % 8 too: the up half's scales and bias start at column inter.
  return inter > 0 && inter % 8 == 0 && act_stride >= inter &&
         Vec8EpilogueTakes(2 * inter, act_stride, act, raw, col_scales, per_channel, bias);
}

cudaError_t Fp8GemmSwiGluEpilogue(void* act, std::int64_t act_stride, const void* raw,
                                  const float* row_scales, const float* col_scales,
                                  bool per_channel, const void* bias, DType dtype, std::int64_t m,
                                  std::int64_t inter, cudaStream_t stream) {
  if (m < 0) return cudaErrorInvalidValue;
  if (!Fp8SwiGluEpilogueTakes(act_stride, act, raw, col_scales, per_channel, bias, inter)) {
    return cudaErrorNotSupported;
  }
  if (m == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(CeilDiv(inter / 8, kThreads)),
                  static_cast<unsigned>(std::min<std::int64_t>(m, 65535)));
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    return LaunchProgrammatic(Fp8SwiGluEpilogueVec8Kernel<T>, grid, dim3(kThreads), 0, stream,
                              static_cast<T*>(act), act_stride,
                              static_cast<const __nv_bfloat16*>(raw), row_scales, col_scales,
                              per_channel, static_cast<const T*>(bias), m, static_cast<int>(inter));
  });
  return cudaErrorInvalidValue;
}

}  // namespace inflight::kernels::cuda
