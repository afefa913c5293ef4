// The CUDA transformer's W8A8 FP8 layers with fused activation producers: the RMSNorm before qkv
// and gate/up writes its rows as FP8 codes and row scales, and the gate/up epilogue writes the
// SwiGLU activations as down's codes (kernels/cuda/fp8_activation_producers.h), so no quantize pass
// reads the activations back; under a static input scale for down and from
// kFusedSwiGluFp8MinRows rows, the gate/up GEMM writes those codes itself (gemm_swiglu_fp8.h). The
// same bits as Norm then DecoderLinear (which quantizes in its own pass). A decode step of 1,024
// sequences of the 8B shape on an H200 spent 1.23 ms of 23.4 in those passes
// (bench/kernel_profile_round.sh).
#include "common/env_switch.h"
#include "kernels/cuda/fp8_activation_producers.h"
#include "kernels/cuda/gemm_swiglu_fp8.h"
#include "model/cuda_status.h"
#include "model/cuda_transformer.h"

namespace inflight::model {

namespace kc = kernels::cuda;

namespace {

// INFLIGHT_FP8_FUSED_PRODUCERS=0 runs the separate quantize passes instead, an A/B switch.
bool FusedProducersOn() {
  static const bool on = EnvSwitchOn("INFLIGHT_FP8_FUSED_PRODUCERS");
  return on;
}

// INFLIGHT_FP8_FUSED_SWIGLU_GEMM=0 keeps cuBLASLt and the SwiGLU codes pass where the one-kernel
// gate/up layer (kernels/cuda/gemm_swiglu_fp8.h) would run, an A/B switch.
bool FusedSwiGluGemmOn() {
  static const bool on = EnvSwitchOn("INFLIGHT_FP8_FUSED_SWIGLU_GEMM");
  return on;
}

// INFLIGHT_FP8_FUSED_SWIGLU_MIN_ROWS overrides kFusedSwiGluFp8MinRows, for measuring the switch.
std::int64_t FusedSwiGluGemmMinRows(std::int64_t fallback) {
  static const long long rows = EnvInteger("INFLIGHT_FP8_FUSED_SWIGLU_MIN_ROWS", fallback);
  return rows;
}

}  // namespace

kc::Fp8Rows CudaTransformer::Fp8RowsIn(void* buffer, std::int64_t width) const {
  // The codes take the first max_tokens_ * width bytes of a [max_tokens_, width] buffer of the
  // 2-byte dtype, the scales the rest (Fp8RowsFit says whether they fit).
  char* base = static_cast<char*>(buffer);
  const std::int64_t scales_at = (max_tokens_ * width + 15) / 16 * 16;
  return {reinterpret_cast<std::uint8_t*>(base), reinterpret_cast<float*>(base + scales_at)};
}

bool CudaTransformer::Fp8RowsFit(std::int64_t width) const {
  return (max_tokens_ * width + 15) / 16 * 16 + 4 * max_tokens_ <= 2 * max_tokens_ * width;
}

Result<bool> CudaTransformer::Fp8NormQkv(const DeviceLayer& l, std::int64_t T,
                                         std::int64_t qkv_dim) {
  const std::int64_t H = config_.hidden_size;
  if (!FusedProducersOn() || !l.qkv_q.present() || l.qkv_q.kind != kc::QuantWeightKind::kFp8E4M3 ||
      config_.norm != NormKind::kRmsNorm || !Fp8RowsFit(H)) {
    return false;
  }
  const kc::Fp8Rows rows = Fp8RowsIn(normed_.get(), H);
  if (!kc::RmsNormFp8Takes(H, residual_.get(), l.attn_norm, rows.codes) ||
      !quant_linear_->TakesFp8Rows(l.qkv_q, dtype_, T, qkv_dim, H, normed_.get(), H,
                                   quant_scratch_)) {
    return false;
  }
  RETURN_IF_ERROR(CudaStatus(kc::RmsNormQuantFp8(rows, residual_.get(), l.attn_norm, dtype_, T, H,
                                                 config_.norm_eps, l.qkv_q.input_scale, stream_),
                             "RmsNorm (FP8 codes)"));
  RETURN_IF_ERROR(
      CudaStatus(quant_linear_->RunFp8Rows(qkv_.get(), qkv_dim, rows, l.qkv_q, l.qkv_bias, dtype_,
                                           T, qkv_dim, H, false, quant_scratch_, stream_),
                 "quantized linear qkv"));
  return true;
}

Result<bool> CudaTransformer::Fp8NormMlp(const DeviceLayer& l, std::int64_t T, std::int64_t inter) {
  const std::int64_t H = config_.hidden_size;
  if (!FusedProducersOn() || !l.mlp_in_q.present() || !l.down_q.present() ||
      l.mlp_in_q.kind != kc::QuantWeightKind::kFp8E4M3 ||
      l.down_q.kind != kc::QuantWeightKind::kFp8E4M3 || config_.norm != NormKind::kRmsNorm ||
      config_.activation != Activation::kSwiGlu || !Fp8RowsFit(H) || !Fp8RowsFit(inter)) {
    return false;
  }
  const kc::Fp8Rows norm_rows = Fp8RowsIn(normed_.get(), H);
  const kc::Fp8Rows act_rows = Fp8RowsIn(mlp_act_.get(), inter);
  // Under a static input scale for down, gate/up, SwiGLU and down's codes are one kernel.
  const bool one_kernel =
      FusedSwiGluGemmOn() && fused_swiglu_ && T >= FusedSwiGluGemmMinRows(kFusedSwiGluFp8MinRows) &&
      l.mlp_in_bias == nullptr &&
      kc::GemmSwiGluFp8Supports(dtype_, T, inter, H, norm_rows, l.mlp_in_q.codes, l.mlp_in_q.scales,
                                !l.mlp_in_q.per_tensor, l.down_q.input_scale, act_rows);
  if (!kc::RmsNormFp8Takes(H, residual_.get(), l.mlp_norm, norm_rows.codes) ||
      !(one_kernel ||
        (quant_linear_->TakesFp8Rows(l.mlp_in_q, dtype_, T, 2 * inter, H, normed_.get(), H,
                                     quant_scratch_) &&
         kc::Fp8SwiGluCodesTakes(inter, quant_scratch_.raw_out, l.mlp_in_q.scales,
                                 !l.mlp_in_q.per_tensor, l.mlp_in_bias, act_rows.codes))) ||
      !quant_linear_->TakesFp8Rows(l.down_q, dtype_, T, H, inter, mlp_act_.get(), inter,
                                   quant_scratch_)) {
    return false;
  }
  RETURN_IF_ERROR(
      CudaStatus(kc::RmsNormQuantFp8(norm_rows, residual_.get(), l.mlp_norm, dtype_, T, H,
                                     config_.norm_eps, l.mlp_in_q.input_scale, stream_),
                 "RmsNorm (FP8 codes)"));
  if (one_kernel) {
    RETURN_IF_ERROR(CudaStatus(
        kc::GemmSwiGluFp8(act_rows, l.down_q.input_scale, norm_rows, l.mlp_in_q.codes,
                          l.mlp_in_q.scales, !l.mlp_in_q.per_tensor, dtype_, T, inter, H, stream_),
        "gate_up + SwiGLU (FP8 codes)"));
  } else {
    RETURN_IF_ERROR(CudaStatus(quant_linear_->RunSwiGluFp8Rows(
                                   act_rows, l.down_q.input_scale, norm_rows, l.mlp_in_q,
                                   l.mlp_in_bias, dtype_, T, inter, H, quant_scratch_, stream_),
                               "quantized linear gate_up"));
  }
  // RowParallelAdd's sum, from codes: rank 0 adds into the residual stream, the others write over
  // their copy, then the all-reduce.
  RETURN_IF_ERROR(CudaStatus(
      quant_linear_->RunFp8Rows(residual_.get(), H, act_rows, l.down_q, l.down_bias, dtype_, T, H,
                                inter, shard_.tp_rank == 0, quant_scratch_, stream_),
      "quantized linear down"));
  RETURN_IF_ERROR(collectives_.AllReduceSum(residual_.get(), T * H, dtype_, stream_));
  return true;
}

}  // namespace inflight::model
