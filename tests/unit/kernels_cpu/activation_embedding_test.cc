// SwiGLU, gelu_new and the embedding gather against direct formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/embedding.h"
#include "unit/kernels_cpu/check_close.h"

namespace inflight::kernels::cpu {
namespace {

using testing::CheckClose;
using testing::MakeTypedWeights;
using testing::RandomFloats;

TEST(ActivationTest, SwiGluIsSiluOfGateTimesUp) {
  std::uint64_t seed = 400;
  for (std::int64_t tokens : {1, 3, 19, 99}) {
    for (std::int64_t inter : {1, 111, 1025}) {
      std::mt19937_64 rng(seed);
      auto gate_up = RandomFloats(rng, tokens * 2 * inter, -8.0f, 8.0f);
      std::vector<double> expected(tokens * inter);
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t i = 0; i < inter; ++i) {
          const double g = gate_up[t * 2 * inter + i], u = gate_up[t * 2 * inter + inter + i];
          expected[t * inter + i] = g / (1.0 + std::exp(-g)) * u;
        }
      std::vector<float> out(tokens * inter + 4, -7.0f);
      SwiGlu(out.data(), gate_up.data(), tokens, inter);
      for (int g = 0; g < 4; ++g) ASSERT_EQ(out[tokens * inter + g], -7.0f);
      out.resize(tokens * inter);
      EXPECT_TRUE(CheckClose(out, expected, 1e-6, seed)) << tokens << "x" << inter;
      ++seed;
    }
  }
}

TEST(ActivationTest, GeluNewIsTanhApproximation) {
  std::mt19937_64 rng(401);
  for (std::int64_t n : {1, 19, 1025}) {
    auto x = RandomFloats(rng, n, -6.0f, 6.0f);
    std::vector<double> expected(n);
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = x[i];
      expected[i] =
          0.5 * v *
          (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
      // The tanh form approximates the exact erf GELU to about 1e-3.
      EXPECT_NEAR(expected[i], 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))), 2e-3);
    }
    std::vector<float> out(n);
    GeluNew(out.data(), x.data(), n);
    EXPECT_TRUE(CheckClose(out, expected, 1e-6, 401));
    GeluNew(x.data(), x.data(), n);  // in place
    EXPECT_EQ(x, out);
  }
}

TEST(EmbeddingTest, GathersRowsAndAddsPositions) {
  std::uint64_t seed = 410;
  for (DType dtype : testing::kWeightDTypes) {
    for (bool learned : {false, true}) {
      for (std::int64_t hidden : {1, 111, 1025}) {
        std::mt19937_64 rng(seed);
        const std::int64_t vocab = 37, max_pos = 50, tokens = 19;
        auto table = MakeTypedWeights(RandomFloats(rng, vocab * hidden), dtype);
        auto pos_table = MakeTypedWeights(RandomFloats(rng, max_pos * hidden), dtype);
        std::vector<std::int32_t> ids(tokens), pos(tokens);
        std::uniform_int_distribution<std::int32_t> id_dist(0, vocab - 1), pos_dist(0, max_pos - 1);
        for (auto& i : ids) i = id_dist(rng);
        for (auto& p : pos) p = pos_dist(rng);
        ids[0] = vocab - 1;  // the last row, whose end is the end of the table
        std::vector<double> expected(tokens * hidden);
        for (std::int64_t t = 0; t < tokens; ++t)
          for (std::int64_t i = 0; i < hidden; ++i)
            expected[t * hidden + i] = table.exact[ids[t] * hidden + i] +
                                       (learned ? pos_table.exact[pos[t] * hidden + i] : 0.0);
        std::vector<float> out(tokens * hidden);
        EmbeddingGather(out.data(), ids.data(), tokens, table.ptr(), hidden,
                        learned ? pos_table.ptr() : WeightPtr(), pos.data());
        // A gather is exact; adding positions rounds once to fp32.
        EXPECT_TRUE(CheckClose(out, expected, learned ? 1e-7 : 0.0, seed))
            << DTypeName(dtype) << " learned " << learned << " hidden " << hidden;
        ++seed;
      }
    }
  }
}

TEST(WeightPtrTest, HalfDecoderMatchesCommonConversionForEveryBitPattern) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float a = HalfBitsToFloat(static_cast<std::uint16_t>(b));
    const float e = Fp16ToFloat(static_cast<std::uint16_t>(b));
    if (std::isnan(e)) {
      ASSERT_TRUE(std::isnan(a)) << b;
    } else {
      ASSERT_EQ(a, e) << "bits " << b;
    }
  }
}

}  // namespace
}  // namespace inflight::kernels::cpu
