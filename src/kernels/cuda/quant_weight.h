// A quantized linear's weight on the device, as an engine rank file stores it
// (docs/engine_format.md, "Quantization"); kernels/cpu/dequantize.h is the host view of the same
// bytes. Plain C++ (no CUDA include): the model layer fills it, the quant kernels read it.
//
//   fp8:  w[o, i] = e4m3(code) * scale[o or 0]
//   int8: w[o, i] = (int8(code) - int8(zero[o, g])) * scale[o, g]
//   int4: w[o, i] = (code - zero[o, g]) * scale[o, g]           code 0..15, zero 0..16
//   g = g_idx[i] when g_idx is set (GPTQ act-order), else i / group_size (0 with one group)
#pragma once

#include <cstdint>

namespace inflight::kernels::cuda {

enum class QuantWeightKind : std::uint8_t { kFp8E4M3, kInt8, kInt4 };

struct QuantWeight {
  QuantWeightKind kind = QuantWeightKind::kFp8E4M3;
  // Device [n, k] bytes: E4M3 (fp8), two's complement (int8); int4 [n, k / 2], column 2j in the
  // low nibble of byte j and 2j + 1 in the high one. Rows start 16-byte aligned when k allows.
  const std::uint8_t* codes = nullptr;
  // Device fp32 [n, num_groups], or [1] for the whole tensor when per_tensor.
  const float* scales = nullptr;
  bool per_tensor = false;
  std::int64_t num_groups = 1;
  std::int64_t group_size = 0;  // 0: one group per row (per channel)
  // Device [n, num_groups]: int4 0..16 / int8 two's complement; null: the implicit zero point (8
  // for int4, 0 for int8; fp8 has none).
  const std::uint8_t* zeros = nullptr;
  // Device [k]: the scale group of each input column; null: column / group_size.
  const std::int32_t* g_idx = nullptr;
  // fp8 only: the static activation scale (the linear's input_scale); 0: per token, amax / 448.
  float input_scale = 0.0f;
  // fp8 per channel whose rows fall in runs of one scale each (a checkpoint's per-tensor q, k and
  // v, or gate and up, fused into one weight): run r is rows [r ? run_ends[r - 1] : 0,
  // run_ends[r]), the last ending at n; num_scalar_runs 0 where the scales are not so. The FP8
  // GEMM then takes each run's scale as a scalar (QuantLinear::set_fp8_scalar_scales).
  static constexpr int kMaxScalarRuns = 3;
  std::int64_t scalar_run_ends[kMaxScalarRuns] = {};
  int num_scalar_runs = 0;

  bool present() const { return codes != nullptr; }
};

}  // namespace inflight::kernels::cuda
