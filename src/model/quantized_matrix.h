// A quantized weight matrix [rows = out_features, cols = in_features] with one code per element:
// the form every source is brought into (the builder's quantizers, the AutoAWQ / AutoGPTQ /
// FP8 checkpoint readers) before it is sliced for tensor parallelism, fused (q/k/v, gate/up) and
// written in the engine's packed layout (docs/engine_format.md, "Quantization").
//
//   fp8:  w[r, c] = e4m3(code) * scale[r, 0]
//   int8: w[r, c] = (int8(code) - int8(zero[r, g])) * scale[r, g]
//   int4: w[r, c] = (code - zero[r, g]) * scale[r, g]          code, zero in [0, 15]
//   g = g_idx[c] when g_idx is set (GPTQ act-order), else c / group_size (0 with one group)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inflight/status.h"
#include "model/quant_config.h"

namespace inflight::model {

struct QuantizedMatrix {
  QuantAlgo algo = QuantAlgo::kNone;
  std::int64_t rows = 0, cols = 0;
  std::vector<std::uint8_t> codes;  // [rows, cols]; int8 as two's complement bytes
  std::int64_t group_size = 0;      // 0: one group over all columns (per channel)
  std::int64_t num_groups = 1;
  std::vector<float> scales;        // [rows, num_groups]
  std::vector<std::uint8_t> zeros;  // [rows, num_groups], or empty: the implicit zero point
  std::vector<std::int32_t> g_idx;  // [cols], or empty
  float input_scale = 0.0f;         // fp8 static activation scale; 0: none

  std::int64_t GroupOf(std::int64_t col) const {
    if (!g_idx.empty()) return g_idx[static_cast<std::size_t>(col)];
    return group_size > 0 ? col / group_size : 0;
  }
  // The implicit zero point when `zeros` is empty: 8 for int4 (codes 0..15 centred), else 0.
  std::uint8_t ImplicitZero() const { return algo == QuantAlgo::kInt4Wo ? 8 : 0; }
  float Dequantize(std::int64_t row, std::int64_t col) const;
  // All of it, [rows, cols] row-major.
  std::vector<float> DequantizeAll() const;
};

// The builder's quantizers (inflight-build --qformat), from fp32 [rows, cols]:
//   fp8: per output row, scale = amax / 448 (1 for an all-zero row), codes = e4m3(w / scale).
//   int8: per row (group_size 0) or per group, symmetric: scale = amax / 127, codes in [-127, 127].
//   int4: per group, symmetric: scale = amax / 7, codes = round(w / scale) + 8 clamped to [0, 15].
QuantizedMatrix QuantizeFp8PerChannel(const float* w, std::int64_t rows, std::int64_t cols);
// The fp8 scale of values whose largest |x| is amax: E4M3's largest finite value maps to amax
// (amax / 448), and 1 for an amax of 0 (nothing to scale).
float Fp8ScaleOfAmax(float amax);
//   fp8 with a given scale for every row (per tensor): codes = e4m3(w / scale), saturating.
QuantizedMatrix QuantizeFp8WithScale(const float* w, std::int64_t rows, std::int64_t cols,
                                     float scale);
QuantizedMatrix QuantizeInt8Symmetric(const float* w, std::int64_t rows, std::int64_t cols,
                                      std::int64_t group_size);
QuantizedMatrix QuantizeInt4Symmetric(const float* w, std::int64_t rows, std::int64_t cols,
                                      std::int64_t group_size);

// Rows [r0, r1).
QuantizedMatrix SliceRows(const QuantizedMatrix& m, std::int64_t r0, std::int64_t r1);
// Columns [c0, c1): scale groups must not straddle the cut (c0 and the slice's width multiples of
// group_size, or the slice ending at cols); with g_idx every group is kept and g_idx is cut.
// `what` names the tensor in errors.
Result<QuantizedMatrix> SliceCols(const QuantizedMatrix& m, std::int64_t c0, std::int64_t c1,
                                  const std::string& what);
// Writes part `p` of `m` into dst (exactly the bytes of QuantPartShape x QuantPartDType). Errors:
// a matrix that does not fit the config (per_tensor with differing row scales, say).
Status WriteQuantPart(const QuantConfig& q, QuantPart p, const QuantizedMatrix& m, std::byte* dst);

// Part `p` of the pieces stacked along rows (q, k, v; gate, up), written as WriteQuantPart writes
// the one matrix they make, without making it. The pieces must agree on algo, columns, groups and
// g_idx; a piece without zero points gets its implicit one written out when another has them; the
// static input scale is the largest (the fused GEMM quantizes its one input once). `what` names
// the tensor in errors.
Status WriteStackedQuantPart(const QuantConfig& q, QuantPart p,
                             const std::vector<const QuantizedMatrix*>& pieces,
                             const std::string& what, std::byte* dst);

}  // namespace inflight::model
