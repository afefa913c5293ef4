// The packings of the published formats (AutoAWQ GEMM, AutoGPTQ v1 / v2 at 4 and 8 bits, with and
// without act-order) unpacked from random codes packed here by the formats' rules; the builder's
// quantizers; slicing and fusing of quantized matrices; the engine's int4 nibble order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "model/quant_sources.h"
#include "model/quantized_matrix.h"

namespace inflight::model {
namespace {

std::vector<int> RandomInts(std::size_t n, int hi, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(0, hi);
  std::vector<int> v(n);
  for (int& x : v) x = u(rng);
  return v;
}

std::vector<float> RandomFloats(std::size_t n, std::uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> u(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(AwqGemm, UnpacksCodesZerosAndScalesInAwqOrder) {
  const std::int64_t in = 64, out = 24, g = 16, groups = in / g;
  const auto codes = RandomInts(out * in, 15, 1);  // [out, in]
  const auto zeros = RandomInts(out * groups, 15, 2);
  const auto scales = RandomFloats(groups * out, 3);
  // AutoAWQ: qweight [in, out / 8], nibble n of word j = output 8j + order[n].
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  std::vector<std::int32_t> qweight(in * out / 8, 0), qzeros(groups * out / 8, 0);
  for (std::int64_t i = 0; i < in; ++i)
    for (std::int64_t j = 0; j < out / 8; ++j)
      for (int n = 0; n < 8; ++n)
        qweight[i * (out / 8) + j] |= static_cast<std::int32_t>(
            static_cast<std::uint32_t>(codes[(8 * j + order[n]) * in + i]) << (4 * n));
  for (std::int64_t gi = 0; gi < groups; ++gi)
    for (std::int64_t j = 0; j < out / 8; ++j)
      for (int n = 0; n < 8; ++n)
        qzeros[gi * (out / 8) + j] |= static_cast<std::int32_t>(
            static_cast<std::uint32_t>(zeros[(8 * j + order[n]) * groups + gi]) << (4 * n));
  const QuantizedMatrix m = UnpackAwqGemm(qweight.data(), qzeros.data(), scales.data(), in, out, g);
  ASSERT_EQ(m.rows, out);
  ASSERT_EQ(m.cols, in);
  ASSERT_EQ(m.num_groups, groups);
  for (std::int64_t o = 0; o < out; ++o) {
    for (std::int64_t i = 0; i < in; ++i) ASSERT_EQ(m.codes[o * in + i], codes[o * in + i]);
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      ASSERT_EQ(m.zeros[o * groups + gi], zeros[o * groups + gi]) << o << " " << gi;
      ASSERT_EQ(m.scales[o * groups + gi], scales[gi * out + o]);
    }
  }
  // w = (q - z) * s with input i's group.
  EXPECT_EQ(m.Dequantize(5, 37),
            (codes[5 * in + 37] - zeros[5 * groups + 2]) * scales[2 * out + 5]);
}

struct GptqCase {
  int bits;
  bool act_order, v1;
};

TEST(Gptq, UnpacksAlongInputsWithGroupIndexAndZeroOffset) {
  for (const GptqCase c :
       {GptqCase{4, false, true}, GptqCase{4, true, true}, GptqCase{4, true, false},
        GptqCase{8, true, true}, GptqCase{8, false, false}}) {
    const std::int64_t in = 64, out = 16, g = 16, groups = in / g, pw = 32 / c.bits;
    const int maxq = (1 << c.bits) - 1;
    const auto codes = RandomInts(out * in, maxq, 4);
    auto zeros = RandomInts(out * groups, maxq, 5);
    if (c.v1) {
      for (int& z : zeros) z = std::max(z, 1);  // v1 stores z - 1 (z = 0 wraps; tested apart)
    }
    const auto scales = RandomFloats(groups * out, 6);
    std::vector<std::int32_t> perm(in), g_idx(in);
    std::iota(perm.begin(), perm.end(), 0);
    if (c.act_order) std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
    for (std::int64_t k = 0; k < in; ++k) g_idx[perm[k]] = static_cast<std::int32_t>(k / g);
    std::vector<std::int32_t> qweight(in / pw * out, 0), qzeros(groups * out / pw, 0);
    for (std::int64_t i = 0; i < in; ++i)
      for (std::int64_t o = 0; o < out; ++o)
        qweight[(i / pw) * out + o] |= static_cast<std::int32_t>(
            static_cast<std::uint32_t>(codes[o * in + i]) << (c.bits * (i % pw)));
    for (std::int64_t gi = 0; gi < groups; ++gi)
      for (std::int64_t o = 0; o < out; ++o)
        qzeros[gi * (out / pw) + o / pw] |= static_cast<std::int32_t>(
            static_cast<std::uint32_t>(zeros[o * groups + gi] - (c.v1 ? 1 : 0))
            << (c.bits * (o % pw)));
    const QuantizedMatrix m =
        UnpackGptq(qweight.data(), qzeros.data(), scales.data(),
                   c.act_order ? g_idx.data() : nullptr, in, out, c.bits, g, c.v1);
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < in; ++i) {
        const std::int64_t gi = g_idx[i];
        const float want =
            static_cast<float>(codes[o * in + i] - zeros[o * groups + gi]) * scales[gi * out + o];
        ASSERT_EQ(m.Dequantize(o, i), want) << "bits " << c.bits << " act_order " << c.act_order
                                            << " v1 " << c.v1 << " at " << o << ", " << i;
      }
  }
}

TEST(Gptq, Version1ZeroOfZeroIsSixteenAsAutoGptqComputesIt) {
  // One 4-bit linear, 8 inputs, 8 outputs, one group: zero 0 stored as (0 - 1) & 15 = 15.
  std::vector<std::int32_t> qweight(8, 0), qzeros{static_cast<std::int32_t>(0xffffffffu)};
  qweight[0] = 3;  // input 0 of output 0: code 3
  const std::vector<float> scales(8, 0.5f);
  const QuantizedMatrix m = UnpackGptq(qweight.data(), qzeros.data(), scales.data(), nullptr, 8, 8,
                                       4, 0, /*zeros_minus_one=*/true);
  EXPECT_EQ(m.Dequantize(0, 0), (3 - 16) * 0.5f);
}

TEST(Quantizers, ErrorsWithinHalfAStepAndCodesInRange) {
  const std::int64_t rows = 7, cols = 40;
  const auto w = RandomFloats(rows * cols, 8, 0.3f);
  const QuantizedMatrix q4 = QuantizeInt4Symmetric(w.data(), rows, cols, 16);
  const QuantizedMatrix q8 = QuantizeInt8Symmetric(w.data(), rows, cols, 0);
  const QuantizedMatrix f8 = QuantizeFp8PerChannel(w.data(), rows, cols);
  ASSERT_EQ(q4.num_groups, 3);  // 16 + 16 + 8 columns
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const float x = w[r * cols + c];
      ASSERT_LE(q4.codes[r * cols + c], 15);
      ASSERT_LE(std::fabs(q4.Dequantize(r, c) - x), q4.scales[r * 3 + c / 16] / 2 * 1.0001f);
      ASSERT_LE(std::fabs(q8.Dequantize(r, c) - x), q8.scales[r] / 2 * 1.0001f);
      ASSERT_LE(std::fabs(f8.Dequantize(r, c) - x), std::fabs(x) / 16 + f8.scales[r] / 512);
    }
  }
}

TEST(QuantizedMatrix, SlicesKeepGroupsAndFusingChecksLayouts) {
  const auto w = RandomFloats(std::size_t{4} * 64, 9);
  const QuantizedMatrix m = QuantizeInt4Symmetric(w.data(), 4, 64, 16);
  auto right = SliceCols(m, 32, 64, "down_proj");
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  EXPECT_EQ(right->num_groups, 2);
  for (std::int64_t r = 0; r < 4; ++r)
    for (std::int64_t c = 0; c < 32; ++c)
      ASSERT_EQ(right->Dequantize(r, c), m.Dequantize(r, 32 + c));
  auto cut = SliceCols(m, 8, 40, "down_proj");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("down_proj: the tensor-parallel slice of input columns "
                                        "[8, 40) cuts scale groups of group_size 16"),
            std::string::npos)
      << cut.status().message();
  // Act-order: every group kept, the index cut.
  QuantizedMatrix a = m;
  a.g_idx.resize(64);
  for (int c = 0; c < 64; ++c) a.g_idx[c] = (c * 7) % 4;
  auto a_cut = SliceCols(a, 8, 40, "o_proj");
  ASSERT_TRUE(a_cut.ok());
  EXPECT_EQ(a_cut->num_groups, 4);
  EXPECT_EQ(a_cut->Dequantize(1, 3), a.Dequantize(1, 11));
  QuantConfig q;
  q.quant_algo = QuantAlgo::kInt4Wo;
  q.weight_granularity = WeightScaleGranularity::kPerGroup;
  q.group_size = 16;
  std::vector<std::byte> out(std::size_t{4} * 64);
  const Status mixed =
      WriteStackedQuantPart(q, QuantPart::kWeight, {&m, &a}, "layers.0.qkv.weight", out.data());
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.message().find("layers.0.qkv.weight: its fused pieces have different g_idx"),
            std::string::npos)
      << mixed.message();
}

// Each part of stacked pieces is the bytes of the matrix whose rows are the pieces' in turn: here
// rows 0, 2, 3 of one matrix, against the same rows written from the matrix itself one at a time.
// A piece without zero points gets its implicit one where another has them; the input scale is
// the largest.
TEST(QuantizedMatrix, StackedPartsAreThePiecesRowsInTurn) {
  const auto w = RandomFloats(std::size_t{4} * 64, 11);
  QuantizedMatrix m = QuantizeInt4Symmetric(w.data(), 4, 64, 16);
  QuantConfig q;
  q.quant_algo = QuantAlgo::kInt4Wo;
  q.weight_granularity = WeightScaleGranularity::kPerGroup;
  q.group_size = 16;
  QuantizedMatrix top = SliceRows(m, 0, 1), bottom = SliceRows(m, 2, 4);
  bottom.zeros.assign(bottom.scales.size(), 9);
  top.input_scale = 0.5f;
  bottom.input_scale = 2.0f;
  const std::vector<const QuantizedMatrix*> stack = {&top, &bottom};
  for (const QuantPart part : {QuantPart::kWeight, QuantPart::kWeightScale, QuantPart::kWeightZero,
                               QuantPart::kGroupIndex, QuantPart::kInputScale}) {
    const std::string name = QuantPartSuffix(part);
    // Expected: row by row from the pieces (each written alone), then the per-matrix parts.
    std::vector<std::byte> want;
    const bool per_row = part == QuantPart::kWeight || part == QuantPart::kWeightScale ||
                         part == QuantPart::kWeightZero;
    for (const QuantizedMatrix* piece : per_row ? stack : std::vector<const QuantizedMatrix*>{}) {
      for (std::int64_t r = 0; r < piece->rows; ++r) {
        QuantizedMatrix row = SliceRows(*piece, r, r + 1);
        if (part == QuantPart::kWeightZero && row.zeros.empty()) {
          row.zeros.assign(row.scales.size(), row.ImplicitZero());
        }
        std::vector<std::byte> bytes(64);
        ASSERT_TRUE(WriteQuantPart(q, part, row, bytes.data()).ok()) << name;
        const std::size_t n = part == QuantPart::kWeight        ? 32
                              : part == QuantPart::kWeightScale ? 16
                                                                : 4;
        want.insert(want.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      }
    }
    if (part == QuantPart::kGroupIndex) {
      want.resize(std::size_t{64} * 4);
      ASSERT_TRUE(WriteQuantPart(q, part, m, want.data()).ok());
    }
    if (part == QuantPart::kInputScale) {
      want.resize(4);
      const float largest = 2.0f;
      std::memcpy(want.data(), &largest, 4);
    }
    std::vector<std::byte> got(want.size() + 8, std::byte{0x5a});
    const Status s = WriteStackedQuantPart(q, part, stack, "layers.0.qkv.weight", got.data());
    ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin())) << name;
    EXPECT_EQ(got[want.size()], std::byte{0x5a}) << name << ": wrote past its bytes";
  }
  // The top piece's zero points are its implicit 8, the bottom's the given 9.
  std::vector<std::byte> zeros(std::size_t{3} * 4);
  ASSERT_TRUE(WriteStackedQuantPart(q, QuantPart::kWeightZero, stack, "qkv", zeros.data()).ok());
  EXPECT_EQ(static_cast<int>(zeros[0]), 8);
  EXPECT_EQ(static_cast<int>(zeros[4]), 9);
}

TEST(QuantizedMatrix, EngineInt4PacksColumnPairsLowNibbleFirst) {
  QuantConfig q;
  q.quant_algo = QuantAlgo::kInt4Wo;
  q.weight_granularity = WeightScaleGranularity::kPerChannel;
  const std::vector<float> w = {0.7f, -0.7f, 0.1f, 0.0f};  // one row, scale 0.1
  const QuantizedMatrix m = QuantizeInt4Symmetric(w.data(), 1, 4, 0);
  std::vector<std::byte> out(2);
  ASSERT_TRUE(WriteQuantPart(q, QuantPart::kWeight, m, out.data()).ok());
  // codes 7 + 8 = 15, -7 + 8 = 1, 1 + 8 = 9, 8
  EXPECT_EQ(static_cast<int>(out[0]), 15 | (1 << 4));
  EXPECT_EQ(static_cast<int>(out[1]), 9 | (8 << 4));
}

}  // namespace
}  // namespace inflight::model
