// A quantized linear's weight, as an engine rank file stores it (docs/engine_format.md,
// "Quantization"), widened to fp32 [rows, cols]: the CPU runner's dequantizing reference computes
// every product from exactly these values.
#pragma once

#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace inflight::kernels::cpu {

enum class QuantizedWeightKind : std::uint8_t { kFp8E4M3, kInt8, kInt4 };

struct QuantizedWeightView {
  QuantizedWeightKind kind = QuantizedWeightKind::kFp8E4M3;
  // fp8: E4M3 bytes [rows, cols]; int8: two's complement [rows, cols]; int4: [rows, cols / 2],
  // column 2j in the low nibble of byte j, 2j + 1 in the high one, codes 0..15.
  const std::uint8_t* codes = nullptr;
  // [rows, num_groups] fp32, or one value for the whole tensor (per_tensor).
  const float* scales = nullptr;
  bool per_tensor = false;
  std::int64_t num_groups = 1;
  // [rows, num_groups]: int4 codes 0..16 / int8 two's complement; nullptr: the implicit zero point
  // (8 for int4, 0 for int8; fp8 has none).
  const std::uint8_t* zeros = nullptr;
  // [cols]: the scale group of each input column (GPTQ act-order); nullptr: column / group_size.
  const std::int32_t* g_idx = nullptr;
  std::int64_t group_size = 0;  // 0: one group (per channel)
};

// out[r, c] = fp8: e4m3(code) * scale;  int8 / int4: (code - zero) * scale, with the scale and zero
// of (r, group of c). Rows are split over `pool` (nullptr: the calling thread).
void DequantizeWeight(const QuantizedWeightView& w, std::int64_t rows, std::int64_t cols,
                      float* out, ThreadPool* pool);

}  // namespace inflight::kernels::cpu
