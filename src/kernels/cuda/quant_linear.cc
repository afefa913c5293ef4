#include "kernels/cuda/quant_linear.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/activations.h"
#include "kernels/cuda/quant_activation_fp8.h"
#include "kernels/cuda/quant_dequantize.h"
#include "kernels/cuda/quant_gemm_mixed.h"
#include "kernels/cuda/quant_gemv.h"

namespace inflight::kernels::cuda {
namespace {

cudaError_t FromCublas(cublasStatus_t st) {
  if (st == CUBLAS_STATUS_SUCCESS) return cudaSuccess;
  return st == CUBLAS_STATUS_NOT_SUPPORTED ? cudaErrorNotSupported : cudaErrorUnknown;
}

// Row t of a [rows, stride] fp16 / bf16 matrix (2 bytes an element).
void* RowOf(void* base, std::int64_t stride, std::int64_t t) {
  return static_cast<char*>(base) + t * stride * 2;
}

// Rows per FP8 GEMM: what the scratch holds (QuantFp8RowsPerGemm), so Run and the codes-in path
// multiply in the same chunks.
std::int64_t Fp8ChunkRows(const QuantScratch& scratch, std::int64_t m, std::int64_t n,
                          std::int64_t k) {
  const QuantScratchBytes sizes{scratch.weight_bytes, scratch.act_codes_bytes,
                                scratch.act_scales_bytes, scratch.raw_out_bytes};
  return QuantFp8RowsPerGemm(sizes, m, n, k);
}

int DeviceMaxSharedBytes() {
  int device = 0, value = 48 << 10;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    return 48 << 10;
  }
  return value;
}

}  // namespace

QuantLinear::QuantLinear(CublasLtGemm& gemm, CublasLtFp8Gemm* fp8_gemm)
    : gemm_(gemm),
      fp8_gemm_(fp8_gemm),
      max_shared_bytes_(DeviceMaxSharedBytes()),
      prepare_status_(QuantGemvPrepareDevice()) {
  if (prepare_status_ == cudaSuccess) prepare_status_ = QuantMixedGemmPrepareDevice();
}

QuantLinearPath QuantLinear::PathFor(const QuantWeight& w, DType dtype, std::int64_t m,
                                     std::int64_t n, std::int64_t k, const void* x,
                                     std::int64_t x_stride) const {
  const bool gemv = QuantGemvSupports(w, dtype, m, k, x, x_stride);
  const bool fp8 = fp8_gemm_ != nullptr && QuantFp8GemmTakes(w.kind, k, n);
  const bool mixed = QuantMixedGemmSupports(w, dtype, m, k, x, x_stride);
  if (forced_) {
    if (*forced_ == QuantLinearPath::kGemv && gemv) return QuantLinearPath::kGemv;
    if (*forced_ == QuantLinearPath::kFp8Gemm && fp8) return QuantLinearPath::kFp8Gemm;
    if (*forced_ == QuantLinearPath::kMixedGemm && mixed) return QuantLinearPath::kMixedGemm;
    if (*forced_ == QuantLinearPath::kDequantGemm) return QuantLinearPath::kDequantGemm;
  }
  // The Supports functions add the pointer checks to the rule's shape checks.
  QuantLinearPath rule =
      ChooseQuantLinearPath(w.kind, m, n, k, max_shared_bytes_, fp8_gemm_ != nullptr, w.group_size,
                            w.per_tensor, w.g_idx != nullptr);
  if (rule == QuantLinearPath::kGemv && !gemv) {
    rule = fp8                                  ? QuantLinearPath::kFp8Gemm
           : m <= QuantMixedGemmMaxRows(w.kind) ? QuantLinearPath::kMixedGemm
                                                : QuantLinearPath::kDequantGemm;
  }
  if (rule == QuantLinearPath::kMixedGemm && !mixed) return QuantLinearPath::kDequantGemm;
  return rule;
}

cudaError_t QuantLinear::Run(void* y, std::int64_t y_stride, void* x, std::int64_t x_stride,
                             const QuantWeight& w, const void* bias, DType dtype, std::int64_t m,
                             std::int64_t n, std::int64_t k, bool accumulate,
                             const QuantScratch& scratch, cudaStream_t stream) {
  if (m < 0 || n <= 0 || k <= 0 || x_stride < k || y_stride < n) return cudaErrorInvalidValue;
  if (m == 0) return cudaSuccess;
  const QuantLinearPath path = PathFor(w, dtype, m, n, k, x, x_stride);
  if (path == QuantLinearPath::kFp8Gemm) {
    return RunFp8Gemm(y, y_stride, x, x_stride, w, bias, dtype, m, n, k, accumulate, false, scratch,
                      stream);
  }
  if (path == QuantLinearPath::kGemv) {  // rounds FP8 inputs itself
    return QuantGemv(y, y_stride, x, x_stride, w, bias, dtype, m, n, k, accumulate, stream);
  }
  if (path == QuantLinearPath::kMixedGemm) {  // weight-only: the partial sums use the scratch
    return QuantMixedGemm(y, y_stride, x, x_stride, w, bias, dtype, m, n, k, accumulate,
                          scratch.weight, scratch.weight_bytes, stream);
  }
  if (w.kind == QuantWeightKind::kFp8E4M3) {
    const cudaError_t err =
        QuantizeActivationsFp8(x, x_stride, dtype, m, k, w.input_scale, nullptr, nullptr, stream);
    if (err != cudaSuccess) return err;
  }
  return RunDequantGemm(y, y_stride, x, x_stride, w, bias, dtype, m, n, k, accumulate, scratch,
                        stream);
}

cudaError_t QuantLinear::RunSwiGlu(void* act, void* x, std::int64_t x_stride, const QuantWeight& w,
                                   const void* bias, DType dtype, std::int64_t m,
                                   std::int64_t inter, std::int64_t k, const QuantScratch& scratch,
                                   cudaStream_t stream) {
  if (m < 0 || inter <= 0 || k <= 0 || x_stride < k) return cudaErrorInvalidValue;
  if (m == 0) return cudaSuccess;
  if (PathFor(w, dtype, m, 2 * inter, k, x, x_stride) != QuantLinearPath::kFp8Gemm ||
      !Fp8SwiGluEpilogueTakes(inter, act, scratch.raw_out, w.scales, !w.per_tensor, bias, inter)) {
    return cudaErrorNotSupported;
  }
  return RunFp8Gemm(act, inter, x, x_stride, w, bias, dtype, m, 2 * inter, k, false, true, scratch,
                    stream);
}

cudaError_t QuantLinear::RunFp8Gemm(void* y, std::int64_t y_stride, void* x, std::int64_t x_stride,
                                    const QuantWeight& w, const void* bias, DType dtype,
                                    std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate,
                                    bool swiglu, const QuantScratch& scratch, cudaStream_t stream) {
  const std::int64_t rows = Fp8ChunkRows(scratch, m, n, k);
  if (rows <= 0) return cudaErrorNotSupported;
  for (std::int64_t t0 = 0; t0 < m; t0 += rows) {
    const std::int64_t mt = m - t0 < rows ? m - t0 : rows;
    void* xt = RowOf(x, x_stride, t0);
    void* yt = RowOf(y, y_stride, t0);
    cudaError_t err = QuantizeActivationsFp8(xt, x_stride, dtype, mt, k, w.input_scale,
                                             scratch.act_codes, scratch.act_scales, stream);
    if (err != cudaSuccess) return err;
    if (const auto modes = swiglu ? std::nullopt : CublasLtScales(w)) {
      const cublasStatus_t st =
          MultiplyScaledRuns(yt, y_stride, dtype, scratch.act_codes, scratch.act_scales, w, *modes,
                             bias, mt, n, k, accumulate, stream);
      if (st == CUBLAS_STATUS_SUCCESS) continue;
      if (st != CUBLAS_STATUS_NOT_SUPPORTED) return FromCublas(st);
    }
    const cublasStatus_t st =
        fp8_gemm_->Multiply(scratch.raw_out, scratch.act_codes, w.codes, mt, n, k, stream);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED && swiglu) {
      // No FP8 kernel for these rows: the dequantizing path writes their gate/up outputs into the
      // products' scratch, then the SwiGLU pass.
      err = QuantizeActivationsFp8(xt, x_stride, dtype, mt, k, w.input_scale, nullptr, nullptr,
                                   stream);
      if (err == cudaSuccess) {
        err = RunDequantGemm(scratch.raw_out, n, xt, x_stride, w, bias, dtype, mt, n, k, false,
                             scratch, stream);
      }
      if (err == cudaSuccess) err = SwiGlu(yt, scratch.raw_out, dtype, mt, n / 2, stream);
      if (err != cudaSuccess) return err;
      continue;
    }
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
      // The library has no FP8 kernel for this shape: the rows from t0 on take the dequantizing
      // path, on inputs rounded to E4M3 in place (making codes left them as they were).
      err = QuantizeActivationsFp8(xt, x_stride, dtype, m - t0, k, w.input_scale, nullptr, nullptr,
                                   stream);
      if (err != cudaSuccess) return err;
      return RunDequantGemm(yt, y_stride, xt, x_stride, w, bias, dtype, m - t0, n, k, accumulate,
                            scratch, stream);
    }
    if (st != CUBLAS_STATUS_SUCCESS) return FromCublas(st);
    err = swiglu ? Fp8GemmSwiGluEpilogue(yt, y_stride, scratch.raw_out, scratch.act_scales,
                                         w.scales, !w.per_tensor, bias, dtype, mt, n / 2, stream)
                 : Fp8GemmEpilogue(yt, y_stride, scratch.raw_out, scratch.act_scales, w.scales,
                                   !w.per_tensor, bias, dtype, mt, n, accumulate, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

std::optional<CublasLtFp8Gemm::ScaleModes> QuantLinear::CublasLtScales(const QuantWeight& w) const {
  // NOTE: a static input_scale is every row's scale (ActivationFp8Scale), so the row scales'
  // first element is the scalar cuBLASLt wants.
  const bool static_rows = w.input_scale > 0.0f;
  if (fp8_scalar_scales_ && (w.per_tensor || w.num_scalar_runs > 1) && static_rows) {
    return CublasLtFp8Gemm::ScaleModes{false, false};
  }
  if (fp8_outer_vector_) return CublasLtFp8Gemm::ScaleModes{!w.per_tensor, true};
  return std::nullopt;
}

cublasStatus_t QuantLinear::MultiplyScaledRuns(void* y, std::int64_t y_stride, DType dtype,
                                               const std::uint8_t* x_codes, const float* row_scales,
                                               const QuantWeight& w,
                                               CublasLtFp8Gemm::ScaleModes modes, const void* bias,
                                               std::int64_t m, std::int64_t n, std::int64_t k,
                                               bool accumulate, cudaStream_t stream) {
  if (w.per_tensor || modes.per_channel || w.num_scalar_runs <= 1) {
    return fp8_gemm_->MultiplyScaled(y, y_stride, dtype, x_codes, row_scales, w.codes, w.scales,
                                     modes, bias, m, n, k, accumulate, stream);
  }
  // Run r: its columns of y (from y + begin), its rows of the weight, its scale (the value at its
  // first row), its part of the bias. Checked for all runs first: a run refused after others ran
  // would leave an accumulating output half added.
  auto at = [](const void* p, std::int64_t elements, std::int64_t bytes) {
    return p == nullptr ? nullptr : static_cast<const char*>(p) + elements * bytes;
  };
  const auto aligned = CublasLtFp8Gemm::Aligned256;
  for (int pass = 0; pass < 2; ++pass) {
    std::int64_t begin = 0;
    for (int r = 0; r < w.num_scalar_runs; ++r) {
      const std::int64_t end = r + 1 == w.num_scalar_runs ? n : w.scalar_run_ends[r];
      void* y_run = const_cast<char*>(at(y, begin, 2));
      const void* bias_run = at(bias, begin, 2);
      const auto* w_run = reinterpret_cast<const std::uint8_t*>(at(w.codes, begin * k, 1));
      if (pass == 0) {
        if (end <= begin || (end - begin) % 8 != 0 || !aligned(y_run) || !aligned(w_run) ||
            (bias_run != nullptr && !aligned(bias_run)) ||
            !fp8_gemm_->OffersScaled(dtype, m, end - begin, k, modes, bias != nullptr, y_stride)) {
          return CUBLAS_STATUS_NOT_SUPPORTED;
        }
      } else {
        const cublasStatus_t st = fp8_gemm_->MultiplyScaled(
            y_run, y_stride, dtype, x_codes, row_scales, w_run, w.scales + begin, modes, bias_run,
            m, end - begin, k, accumulate, stream);
        if (st != CUBLAS_STATUS_SUCCESS) return st;
      }
      begin = end;
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

bool QuantLinear::Fp8ChunksOffered(const QuantWeight& w, std::int64_t m, std::int64_t n,
                                   std::int64_t k, const QuantScratch& scratch) const {
  if (fp8_gemm_ == nullptr || m <= 0 || !QuantFp8GemmTakes(w.kind, k, n)) return false;
  const std::int64_t rows = Fp8ChunkRows(scratch, m, n, k);
  return rows > 0 && fp8_gemm_->Offers(rows, n, k) &&
         (m % rows == 0 || fp8_gemm_->Offers(m % rows, n, k));
}

bool QuantLinear::TakesFp8Rows(const QuantWeight& w, DType dtype, std::int64_t m, std::int64_t n,
                               std::int64_t k, const void* x, std::int64_t x_stride,
                               const QuantScratch& scratch) const {
  return m > 0 && PathFor(w, dtype, m, n, k, x, x_stride) == QuantLinearPath::kFp8Gemm &&
         Fp8ChunksOffered(w, m, n, k, scratch);
}

template <typename Scaled, typename Epilogue>
cudaError_t QuantLinear::RunFp8RowChunks(const Fp8Rows& x, const QuantWeight& w, std::int64_t m,
                                         std::int64_t n, std::int64_t k,
                                         const QuantScratch& scratch, cudaStream_t stream,
                                         Scaled&& scaled, Epilogue&& epilogue) {
  const std::int64_t rows = Fp8ChunkRows(scratch, m, n, k);
  for (std::int64_t t0 = 0; t0 < m; t0 += rows) {
    const std::int64_t mt = std::min(rows, m - t0);
    cublasStatus_t st = scaled(t0, mt);
    if (st == CUBLAS_STATUS_SUCCESS) continue;
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
      st = fp8_gemm_->Multiply(scratch.raw_out, x.codes + t0 * k, w.codes, mt, n, k, stream);
    }
    if (st != CUBLAS_STATUS_SUCCESS) return FromCublas(st);
    const cudaError_t err = epilogue(t0, mt);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t QuantLinear::RunFp8Rows(void* y, std::int64_t y_stride, Fp8Rows x, const QuantWeight& w,
                                    const void* bias, DType dtype, std::int64_t m, std::int64_t n,
                                    std::int64_t k, bool accumulate, const QuantScratch& scratch,
                                    cudaStream_t stream) {
  if (m < 0 || y_stride < n) return cudaErrorInvalidValue;
  if (m == 0) return cudaSuccess;
  if (!Fp8ChunksOffered(w, m, n, k, scratch)) return cudaErrorNotSupported;
  const auto modes = CublasLtScales(w);
  return RunFp8RowChunks(
      x, w, m, n, k, scratch, stream,
      [&](std::int64_t t0, std::int64_t mt) {
        if (!modes) return CUBLAS_STATUS_NOT_SUPPORTED;
        return MultiplyScaledRuns(RowOf(y, y_stride, t0), y_stride, dtype, x.codes + t0 * k,
                                  x.row_scales + t0, w, *modes, bias, mt, n, k, accumulate, stream);
      },
      [&](std::int64_t t0, std::int64_t mt) {
        return Fp8GemmEpilogue(RowOf(y, y_stride, t0), y_stride, scratch.raw_out, x.row_scales + t0,
                               w.scales, !w.per_tensor, bias, dtype, mt, n, accumulate, stream);
      });
}

cudaError_t QuantLinear::RunSwiGluFp8Rows(Fp8Rows act, float act_static_scale, Fp8Rows x,
                                          const QuantWeight& w, const void* bias, DType dtype,
                                          std::int64_t m, std::int64_t inter, std::int64_t k,
                                          const QuantScratch& scratch, cudaStream_t stream) {
  if (m < 0 || inter <= 0) return cudaErrorInvalidValue;
  if (m == 0) return cudaSuccess;
  if (!Fp8ChunksOffered(w, m, 2 * inter, k, scratch) ||
      !Fp8SwiGluCodesTakes(inter, scratch.raw_out, w.scales, !w.per_tensor, bias, act.codes)) {
    return cudaErrorNotSupported;
  }
  return RunFp8RowChunks(
      x, w, m, 2 * inter, k, scratch, stream,
      [](std::int64_t, std::int64_t) { return CUBLAS_STATUS_NOT_SUPPORTED; },
      [&](std::int64_t t0, std::int64_t mt) {
        return Fp8GemmSwiGluEpilogueCodes(
            {act.codes + t0 * inter, act.row_scales + t0}, scratch.raw_out, x.row_scales + t0,
            w.scales, !w.per_tensor, bias, dtype, mt, inter, act_static_scale, stream);
      });
}

cudaError_t QuantLinear::RunDequantGemm(void* y, std::int64_t y_stride, const void* x,
                                        std::int64_t x_stride, const QuantWeight& w,
                                        const void* bias, DType dtype, std::int64_t m,
                                        std::int64_t n, std::int64_t k, bool accumulate,
                                        const QuantScratch& scratch, cudaStream_t stream) {
  if (scratch.weight_bytes < n * k * 2) return cudaErrorNotSupported;  // fp16 / bf16
  const cudaError_t err = DequantizeWeight(scratch.weight, dtype, w, n, k, stream);
  if (err != cudaSuccess) return err;
  const cublasStatus_t st = accumulate
                                ? gemm_.LinearAdd(y, dtype, y_stride, x, x_stride, scratch.weight,
                                                  bias, dtype, m, n, k, stream)
                                : gemm_.Linear(y, dtype, y_stride, x, x_stride, scratch.weight,
                                               bias, dtype, m, n, k, stream);
  return FromCublas(st);
}

}  // namespace inflight::kernels::cuda
