// The CUDA quantized linear's host-side rule (kernels/cuda/quant_linear_path.h): which kernel a
// shape takes and how large its scratch is. Plain C++, so it runs here without a device.
#include "kernels/cuda/quant_linear_path.h"

#include <gtest/gtest.h>

namespace inflight::kernels::cuda {
namespace {

constexpr std::int64_t kHopperShared = 227 << 10;  // sm_90's opt-in shared memory per block

TEST(QuantLinearPath, OneRowTakesTheGemvAndMoreRowsTheTensorCores) {
  for (QuantWeightKind kind :
       {QuantWeightKind::kFp8E4M3, QuantWeightKind::kInt8, QuantWeightKind::kInt4}) {
    EXPECT_EQ(ChooseQuantLinearPath(kind, 1, 4096, 4096, kHopperShared, true),
              QuantLinearPath::kGemv)
        << static_cast<int>(kind);
    const QuantLinearPath tensor_cores =
        kind == QuantWeightKind::kFp8E4M3 ? QuantLinearPath::kFp8Gemm : QuantLinearPath::kMixedGemm;
    for (std::int64_t m : {2, 3, 8, 9}) {
      EXPECT_EQ(ChooseQuantLinearPath(kind, m, 4096, 4096, kHopperShared, true), tensor_cores)
          << static_cast<int>(kind) << " m=" << m;
    }
  }
  // Rows no tensor-core path takes stay on the GEMV up to eight: act-order int4 (the mixed GEMM
  // wants whole groups a lane), FP8 on a device without an FP8 GEMM.
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kInt4, 3, 4096, 4096, kHopperShared, true, 128,
                                  false, true),
            QuantLinearPath::kGemv);
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kFp8E4M3, 8, 4096, 4096, kHopperShared, false),
            QuantLinearPath::kGemv);
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kFp8E4M3, 9, 4096, 4096, kHopperShared, false),
            QuantLinearPath::kDequantGemm);
  // Llama-3-8B's down projection at 8 rows: 8 x 14336 x 2 bytes fit sm_90's 227 KiB, not 48 KiB.
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kInt4, 8, 4096, 14336, kHopperShared, true, 128,
                                  false, true),
            QuantLinearPath::kGemv);
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kInt4, 8, 4096, 14336, 48 << 10, true, 128,
                                  false, true),
            QuantLinearPath::kDequantGemm);
}

TEST(QuantLinearPath, ColumnsMustBeWholeCodeChunksForTheGemv) {
  // 4096 + 16: whole 16-byte chunks of int8 / fp8 codes (16 columns), not of int4 (32 columns).
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kInt8, 1, 688, 4112, kHopperShared, true),
            QuantLinearPath::kGemv);
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kInt4, 1, 688, 4112, kHopperShared, true),
            QuantLinearPath::kDequantGemm);
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kFp8E4M3, 1, 688, 4104, kHopperShared, true),
            QuantLinearPath::kDequantGemm);  // 4104 % 16 != 0: neither GEMV nor FP8 GEMM
}

TEST(QuantLinearPath, Fp8PromptsTakeTheFp8GemmWhereTheDeviceHasOne) {
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kFp8E4M3, 200, 688, 4224, kHopperShared, true),
            QuantLinearPath::kFp8Gemm);
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kFp8E4M3, 200, 688, 4224, kHopperShared, false),
            QuantLinearPath::kDequantGemm);
  // n not a multiple of 8 (cuBLASLt's FP8 output alignment): the fallback.
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kFp8E4M3, 200, 690, 4224, kHopperShared, true),
            QuantLinearPath::kDequantGemm);
  // Weight-only formats never take the FP8 GEMM.
  EXPECT_NE(ChooseQuantLinearPath(QuantWeightKind::kInt8, 200, 688, 4224, kHopperShared, true),
            QuantLinearPath::kFp8Gemm);
}

TEST(QuantLinearPath, WeightOnlyRowsPastTheGemvTakeTheMixedGemmUpToItsLimit) {
  for (QuantWeightKind kind : {QuantWeightKind::kInt8, QuantWeightKind::kInt4}) {
    for (std::int64_t m : {std::int64_t{9}, std::int64_t{64}, QuantMixedGemmMaxRows(kind)}) {
      EXPECT_EQ(ChooseQuantLinearPath(kind, m, 4096, 4096, kHopperShared, true, 128),
                QuantLinearPath::kMixedGemm)
          << static_cast<int>(kind) << " m=" << m;
    }
    EXPECT_EQ(ChooseQuantLinearPath(kind, QuantMixedGemmMaxRows(kind) + 1, 4096, 4096,
                                    kHopperShared, true, 128),
              QuantLinearPath::kDequantGemm);
  }
  // Past the GEMV's shared memory (8 rows of 14336 at 48 KiB) the mixed GEMM takes even 8 rows.
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kInt4, 8, 4096, 14336, 48 << 10, true, 128),
            QuantLinearPath::kMixedGemm);
  // FP8 weights have their own GEMM; without one they dequantize.
  EXPECT_EQ(ChooseQuantLinearPath(QuantWeightKind::kFp8E4M3, 64, 4096, 4096, kHopperShared, false),
            QuantLinearPath::kDequantGemm);
}

TEST(QuantLinearPath, TheMixedGemmWantsWholeColumnTilesAndLaneSizedGroups) {
  const auto int4 = QuantWeightKind::kInt4;
  EXPECT_TRUE(QuantMixedGemmLayoutTakes(int4, 4096, 128, false, false));
  EXPECT_TRUE(QuantMixedGemmLayoutTakes(int4, 4096, 32, false, false));
  EXPECT_TRUE(QuantMixedGemmLayoutTakes(int4, 4096, 0, false, false));         // per channel
  EXPECT_TRUE(QuantMixedGemmLayoutTakes(int4, 4096, 48, true, false));         // per tensor
  EXPECT_FALSE(QuantMixedGemmLayoutTakes(int4, 4096, 48, false, false));       // 48 % 32 != 0
  EXPECT_FALSE(QuantMixedGemmLayoutTakes(int4, 4096, 96, false, false));       // not a power of two
  EXPECT_FALSE(QuantMixedGemmLayoutTakes(int4, 4096, 128, false, true));       // act-order g_idx
  EXPECT_FALSE(QuantMixedGemmLayoutTakes(int4, 4096 + 64, 64, false, false));  // k % 128 != 0
  EXPECT_FALSE(QuantMixedGemmLayoutTakes(QuantWeightKind::kFp8E4M3, 4096, 0, false, false));
  EXPECT_EQ(ChooseQuantLinearPath(int4, 64, 4096, 4096, kHopperShared, true, 128, false, true),
            QuantLinearPath::kDequantGemm);
}

TEST(QuantLinearPath, ScratchFitsTheLargestLinearAndChunksFp8Rows) {
  // Llama-3-8B: gate_up [28672, 4096] is the largest linear, down has the largest k (14336).
  const std::int64_t max_n = 28672, max_k = 14336, max_nk = std::int64_t{28672} * 4096;
  const QuantScratchBytes int4 =
      QuantLinearScratchBytes(QuantWeightKind::kInt4, 8192, max_n, max_k, max_nk, 2);
  EXPECT_EQ(int4.weight, max_nk * 2);
  EXPECT_EQ(int4.act_codes + int4.act_scales + int4.raw_out, 0);

  const QuantScratchBytes fp8 =
      QuantLinearScratchBytes(QuantWeightKind::kFp8E4M3, 8192, max_n, max_k, max_nk, 2);
  EXPECT_EQ(fp8.act_codes, kQuantFp8ChunkRows * max_k);
  EXPECT_EQ(fp8.act_scales, kQuantFp8ChunkRows * 4);
  EXPECT_EQ(fp8.raw_out, kQuantFp8ChunkRows * max_n * 2);
  // 8192 rows go through in chunks of kQuantFp8ChunkRows; fewer rows in one GEMM.
  EXPECT_EQ(QuantFp8RowsPerGemm(fp8, 8192, max_n, 4096), kQuantFp8ChunkRows);
  EXPECT_EQ(QuantFp8RowsPerGemm(fp8, 8192, 4096, max_k), kQuantFp8ChunkRows);
  EXPECT_EQ(QuantFp8RowsPerGemm(fp8, 300, 6144, 4096), 300);

  // Fewer tokens than a chunk: sized for them, rounded to 256 bytes.
  const QuantScratchBytes small = QuantLinearScratchBytes(QuantWeightKind::kFp8E4M3, 33, 688, 4224,
                                                          std::int64_t{688} * 4224, 2);
  EXPECT_EQ(small.act_codes, RoundUp256(std::int64_t{33} * 4224));
  EXPECT_EQ(small.act_scales, 256);
  EXPECT_EQ(small.raw_out, RoundUp256(std::int64_t{33} * 688 * 2));
  EXPECT_EQ(QuantFp8RowsPerGemm(small, 33, 688, 4224), 33);
  EXPECT_EQ(small.total(), small.weight + small.act_codes + small.act_scales + small.raw_out);
}

}  // namespace
}  // namespace inflight::kernels::cuda
