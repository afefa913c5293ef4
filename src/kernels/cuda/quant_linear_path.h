// Which kernel a quantized linear of m rows takes (quant_linear.h), and the scratch the three paths
// need. Plain C++ so the rule is unit-tested on the CPU (tests/unit/quant/quant_linear_path_test).
//
//   kGemv        m == 1 (and up to kQuantGemvMaxRows where no tensor-core path takes the weight):
//                codes streamed once and dequantized in registers (decode
//                is a pass over the weights, so 1 byte (fp8, int8) or half a byte (int4) per
//                weight instead of 2 is where the speed comes from)
//   kFp8Gemm     fp8 at larger m: activations quantized to E4M3, cuBLASLt's FP8 GEMM, scales
//                applied in an epilogue
//   kMixedGemm   int4 / int8 up to QuantMixedGemmMaxRows: mma.sync tensor cores on codes
//                dequantized in registers (quant_gemm_mixed.h)
//   kDequantGemm everything else: the weight dequantized into a scratch in the activation dtype,
//                then the float GEMM (cuBLASLt)
#pragma once

#include <cstdint>

#include "kernels/cuda/quant_weight.h"

namespace inflight::kernels::cuda {

enum class QuantLinearPath : std::uint8_t { kGemv, kFp8Gemm, kMixedGemm, kDequantGemm };

inline const char* QuantLinearPathName(QuantLinearPath p) {
  switch (p) {
    case QuantLinearPath::kGemv:
      return "gemv";
    case QuantLinearPath::kFp8Gemm:
      return "fp8_gemm";
    case QuantLinearPath::kMixedGemm:
      return "mixed_gemm";
    case QuantLinearPath::kDequantGemm:
      return "dequant_gemm";
  }
  return "?";
}

// The most rows the GEMV takes: past a few rows a GEMM's tensor cores win even against twice the
// bytes (the float GEMV stops at 1 row for the same reason; 8 is where weight-only kernels such as
// TensorRT-LLM's weight-only GEMV hand over to a GEMM).
constexpr std::int64_t kQuantGemvMaxRows = 8;

// Input columns one 16-byte load of codes covers: 32 int4 codes, 16 int8 or fp8 ones.
constexpr std::int64_t QuantColumnsPerChunk(QuantWeightKind kind) {
  return kind == QuantWeightKind::kInt4 ? 32 : 16;
}

// The GEMV stages the m input rows (2 bytes an element) in shared memory: m * k * 2 bytes must fit
// in max_shared_bytes, and each weight row must be whole 16-byte chunks.
inline bool QuantGemvTakes(QuantWeightKind kind, std::int64_t m, std::int64_t k,
                           std::int64_t max_shared_bytes) {
  return m >= 1 && m <= kQuantGemvMaxRows && k > 0 && k % QuantColumnsPerChunk(kind) == 0 &&
         m * k * 2 <= max_shared_bytes;
}

// cuBLASLt's FP8 GEMM wants k (the shared dimension) and the leading dimensions multiples of 16.
inline bool QuantFp8GemmTakes(QuantWeightKind kind, std::int64_t k, std::int64_t n) {
  return kind == QuantWeightKind::kFp8E4M3 && k % 16 == 0 && n % 8 == 0;
}

// The most rows the mixed-input GEMM takes: past them the float GEMM on wgmma tensor cores
// outruns mma.sync by more than the dequantizing pass (one copy of the weight) costs. H200, 8B
// linears: int4 gate_up at 256 rows 221 vs 249 us, at 512 456 vs 310; int8 gate_up at 128 rows
// 138 vs ~160, at 256 231 vs 186 (int8 dequantizes with one byte less to read).
constexpr std::int64_t QuantMixedGemmMaxRows(QuantWeightKind kind) {
  return kind == QuantWeightKind::kInt4 ? 256 : 128;
}

// The mixed-input GEMM's columns come in tiles of 128, and each lane's 32 columns of a tile must
// lie in one scale group: groups of a power of two >= 32 columns (a shift finds them), one a
// row, or one for the tensor; no g_idx (act-order scatters a group's columns). int4 and int8
// codes only (fp8 has its GEMM).
inline bool QuantMixedGemmLayoutTakes(QuantWeightKind kind, std::int64_t k, std::int64_t group_size,
                                      bool per_tensor, bool g_idx) {
  const bool pow2 = group_size >= 32 && (group_size & (group_size - 1)) == 0;
  const bool groups = per_tensor || (!g_idx && (group_size == 0 || pow2));
  return kind != QuantWeightKind::kFp8E4M3 && groups && k > 0 && k % 128 == 0;
}

// group_size, per_tensor, g_idx: the weight's scale layout (quant_weight.h).
inline QuantLinearPath ChooseQuantLinearPath(QuantWeightKind kind, std::int64_t m, std::int64_t n,
                                             std::int64_t k, std::int64_t max_shared_bytes,
                                             bool fp8_gemm_available, std::int64_t group_size = 0,
                                             bool per_tensor = false, bool g_idx = false) {
  // One row: the GEMV (its one-row kernel streams the codes at 50-87% of their floor). From two
  // rows on the tensor-core paths win by 3-10x: on the 8B's gate_up the GEMV took 110 / 119 / 202
  // us at 2 rows (fp8 / int8 / int4), the FP8 GEMM and the mixed GEMM 35 / 42 / 34 us at 9 (H200,
  // inflight-bench-gpu-quant, 2026-12-01). The GEMV keeps the 2-8 rows no tensor-core path takes
  // (act-order g_idx, odd groups, no FP8 GEMM on the device).
  const bool gemv = QuantGemvTakes(kind, m, k, max_shared_bytes);
  if (gemv && m == 1) return QuantLinearPath::kGemv;
  if (fp8_gemm_available && QuantFp8GemmTakes(kind, k, n)) return QuantLinearPath::kFp8Gemm;
  if (m <= QuantMixedGemmMaxRows(kind) &&
      QuantMixedGemmLayoutTakes(kind, k, group_size, per_tensor, g_idx)) {
    return QuantLinearPath::kMixedGemm;
  }
  return gemv ? QuantLinearPath::kGemv : QuantLinearPath::kDequantGemm;
}

// The FP8 path runs at most this many rows per GEMM: its scratch (codes, unscaled products) then
// stays a fixed size however many tokens a step has (2048 x 28672 bf16 products: 117 MB).
constexpr std::int64_t kQuantFp8ChunkRows = 2048;

// Bytes of each scratch a runner keeps for its quantized linears (one set, shared by every layer:
// the linears run one after another on one stream). 256-byte multiples (cuBLASLt's alignment).
struct QuantScratchBytes {
  std::int64_t weight = 0;  // kDequantGemm: the largest linear dequantized, [n, k] x elem
  // kFp8Gemm, over rows = min(max_m, kQuantFp8ChunkRows):
  std::int64_t act_codes = 0;   // [rows, max_k] E4M3
  std::int64_t act_scales = 0;  // [rows] fp32
  std::int64_t raw_out = 0;     // [rows, max_n] bf16, the unscaled products
  std::int64_t total() const { return weight + act_codes + act_scales + raw_out; }
};

inline std::int64_t RoundUp256(std::int64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// The rows one FP8 GEMM of a linear [n, k] takes with this scratch: all m, or a chunk; 0 when
// not even one row fits.
inline std::int64_t QuantFp8RowsPerGemm(const QuantScratchBytes& s, std::int64_t m, std::int64_t n,
                                        std::int64_t k) {
  std::int64_t rows = m;
  if (s.act_codes / k < rows) rows = s.act_codes / k;
  if (s.act_scales / 4 < rows) rows = s.act_scales / 4;
  if (s.raw_out / (n * 2) < rows) rows = s.raw_out / (n * 2);
  return rows;
}

// max_weight_elems: the largest n * k over the linears; max_n, max_k: the largest n and k;
// elem_bytes: the activation dtype's. No fp8 parts for weight-only kinds.
inline QuantScratchBytes QuantLinearScratchBytes(QuantWeightKind kind, std::int64_t max_m,
                                                 std::int64_t max_n, std::int64_t max_k,
                                                 std::int64_t max_weight_elems,
                                                 std::int64_t elem_bytes) {
  QuantScratchBytes s;
  s.weight = RoundUp256(max_weight_elems * elem_bytes);
  if (kind == QuantWeightKind::kFp8E4M3) {
    const std::int64_t rows = max_m < kQuantFp8ChunkRows ? max_m : kQuantFp8ChunkRows;
    s.act_codes = RoundUp256(rows * max_k);
    s.act_scales = RoundUp256(rows * 4);
    s.raw_out = RoundUp256(rows * max_n * 2);
  }
  return s;
}

}  // namespace inflight::kernels::cuda
