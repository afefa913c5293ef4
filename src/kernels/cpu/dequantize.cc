#include "kernels/cpu/dequantize.h"

#include "common/fp8_e4m3.h"

namespace inflight::kernels::cpu {
namespace {

void DequantizeRow(const QuantizedWeightView& w, std::int64_t r, std::int64_t cols, float* out) {
  const std::int64_t g = w.num_groups;
  const float* scale_row = w.per_tensor ? w.scales : w.scales + r * g;
  const std::uint8_t* zero_row = w.zeros ? w.zeros + r * g : nullptr;
  auto group_of = [&](std::int64_t c) -> std::int64_t {
    if (w.per_tensor) return 0;
    if (w.g_idx) return w.g_idx[c];
    return w.group_size > 0 ? c / w.group_size : 0;
  };
  switch (w.kind) {
    case QuantizedWeightKind::kFp8E4M3: {
      const std::uint8_t* codes = w.codes + r * cols;
      for (std::int64_t c = 0; c < cols; ++c)
        out[c] = Fp8E4M3ToFloat(codes[c]) * scale_row[group_of(c)];
      break;
    }
    case QuantizedWeightKind::kInt8: {
      const std::uint8_t* codes = w.codes + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t k = group_of(c);
        const int zero = zero_row ? static_cast<std::int8_t>(zero_row[k]) : 0;
        out[c] = static_cast<float>(static_cast<std::int8_t>(codes[c]) - zero) * scale_row[k];
      }
      break;
    }
    case QuantizedWeightKind::kInt4: {
      const std::uint8_t* packed = w.codes + r * (cols / 2);
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t k = group_of(c);
        const int code = (packed[c / 2] >> (4 * (c % 2))) & 0xf;
        const int zero = zero_row ? zero_row[k] : 8;
        out[c] = static_cast<float>(code - zero) * scale_row[k];
      }
      break;
    }
  }
}

}  // namespace

void DequantizeWeight(const QuantizedWeightView& w, std::int64_t rows, std::int64_t cols,
                      float* out, ThreadPool* pool) {
  ParallelFor(pool, rows, 16, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) DequantizeRow(w, r, cols, out + r * cols);
  });
}

}  // namespace inflight::kernels::cpu
