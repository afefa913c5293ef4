// RoPE: rotation as complex multiplication, relative-position invariance, the attention factor, and
// the frequency scalings (their values against transformers' are in model_cpu's rope golden test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include "kernels/cpu/rope.h"
#include "unit/kernels_cpu/check_close.h"

namespace inflight::kernels::cpu {
namespace {

using testing::CheckClose;
using testing::RandomFloats;

// Pair (x[i], x[i + half]) as the complex number x[i] + j x[i + half], rotated by pos * freq_i.
TEST(RopeTest, MatchesComplexRotation) {
  std::uint64_t seed = 300;
  for (std::int64_t head_dim : {64, 80, 96, 128}) {
    for (std::int64_t tokens : {1, 3, 19, 99}) {
      SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << " tokens " << tokens);
      std::mt19937_64 rng(seed);
      const std::int64_t heads = 3, stride = heads * head_dim + 5;  // padded rows: strided access
      auto x = RandomFloats(rng, static_cast<std::size_t>(tokens * stride));
      std::vector<std::int32_t> pos(static_cast<std::size_t>(tokens));
      std::uniform_int_distribution<std::int32_t> pos_dist(0, 4000);
      for (auto& p : pos) p = pos_dist(rng);
      RopeParams params;
      params.head_dim = head_dim;
      params.theta = 10000.0;
      std::vector<float> inv_freq(static_cast<std::size_t>(head_dim / 2));
      RopeInvFrequencies(params, inv_freq.data());

      std::vector<double> expected(x.begin(), x.end());
      const std::int64_t half = head_dim / 2;
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t h = 0; h < heads; ++h)
          for (std::int64_t i = 0; i < half; ++i) {
            const std::int64_t o = t * stride + h * head_dim;
            const double freq = std::pow(10000.0, -2.0 * i / head_dim);
            const std::complex<double> z(x[o + i], x[o + i + half]);
            const auto r = z * std::polar(1.0, pos[t] * freq);
            expected[o + i] = r.real();
            expected[o + i + half] = r.imag();
          }
      std::vector<float> y = x;
      ApplyRope(y.data(), tokens, heads, head_dim, stride, pos.data(), inv_freq.data(), 1.0f);
      // Angles up to 4000 rad carry fp32 rounding of ~4000 * 6e-8, as in Hugging Face's fp32
      // angles.
      EXPECT_TRUE(CheckClose(y, expected, 3e-3, seed));
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t k = heads * head_dim; k < stride; ++k)
          ASSERT_EQ(y[t * stride + k], x[t * stride + k]) << "padding touched";
      ++seed;
    }
  }
}

// q·k after rotation depends only on the distance of their positions.
TEST(RopeTest, ShiftingBothPositionsKeepsDotProducts) {
  std::mt19937_64 rng(301);
  for (std::int64_t head_dim : {64, 80, 96, 128}) {
    auto q = RandomFloats(rng, head_dim), k = RandomFloats(rng, head_dim);
    RopeParams params;
    params.head_dim = head_dim;
    params.theta = 500000.0;
    params.scaling = RopeScaling::kLlama3;
    params.factor = 8.0;
    params.original_max_position_embeddings = 8192.0;
    std::vector<float> inv_freq(head_dim / 2);
    RopeInvFrequencies(params, inv_freq.data());
    auto dot_at = [&](std::int32_t pq, std::int32_t pk) {
      auto a = q, b = k;
      ApplyRope(a.data(), 1, 1, head_dim, head_dim, &pq, inv_freq.data(), 1.0f);
      ApplyRope(b.data(), 1, 1, head_dim, head_dim, &pk, inv_freq.data(), 1.0f);
      double d = 0;
      for (std::int64_t i = 0; i < head_dim; ++i) d += double(a[i]) * b[i];
      return d;
    };
    for (std::int32_t shift : {1, 17, 250}) {
      EXPECT_NEAR(dot_at(10, 3), dot_at(10 + shift, 3 + shift), 1e-4) << head_dim << " " << shift;
      EXPECT_NEAR(dot_at(0, 0), dot_at(shift, shift), 1e-4);
    }
    // And it does change with the distance (the rotation is not the identity).
    EXPECT_GT(std::fabs(dot_at(10, 3) - dot_at(10, 4)), 1e-6);
  }
}

TEST(RopeTest, Llama3ScalingFrequencies) {
  RopeParams p;
  p.head_dim = 128;
  p.theta = 500000.0;
  p.scaling = RopeScaling::kLlama3;
  p.factor = 8.0;
  p.low_freq_factor = 1.0;
  p.high_freq_factor = 4.0;
  p.original_max_position_embeddings = 8192.0;
  RopeParams plain = p;
  plain.scaling = RopeScaling::kNone;
  std::vector<float> scaled(64), base(64);
  RopeInvFrequencies(p, scaled.data());
  RopeInvFrequencies(plain, base.data());
  int num_high = 0, num_low = 0, num_mid = 0;
  for (int i = 0; i < 64; ++i) {
    const double f = std::pow(500000.0, -2.0 * i / 128.0);
    EXPECT_NEAR(base[i], f, f * 1e-6) << i;
    const double wavelen = 2 * std::numbers::pi / base[i];
    if (wavelen < 8192.0 / 4.0) {  // high frequencies are kept
      EXPECT_EQ(scaled[i], base[i]) << i;
      ++num_high;
    } else if (wavelen > 8192.0 / 1.0) {  // low frequencies are divided by the factor
      EXPECT_NEAR(scaled[i], base[i] / 8.0, base[i] * 1e-6) << i;
      ++num_low;
    } else {  // in between: interpolated in 1/wavelen, strictly between the two
      const double s = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      EXPECT_NEAR(scaled[i], (1 - s) * base[i] / 8.0 + s * base[i], base[i] * 1e-6) << i;
      EXPECT_LT(scaled[i], base[i]);
      EXPECT_GT(scaled[i], base[i] / 8.0);
      ++num_mid;
    }
  }
  // theta 500000, head_dim 128 has frequencies in all three bands.
  EXPECT_GT(num_high, 0);
  EXPECT_GT(num_low, 0);
  EXPECT_GT(num_mid, 0);
  // Frequencies still decrease with the index after scaling.
  for (int i = 1; i < 64; ++i) EXPECT_LT(scaled[i], scaled[i - 1]) << i;
}

std::vector<float> Frequencies(const RopeParams& p) {
  std::vector<float> f(static_cast<std::size_t>(p.head_dim / 2));
  RopeInvFrequencies(p, f.data());
  return f;
}

TEST(RopeTest, LinearDividesEveryFrequency) {
  RopeParams p;
  p.head_dim = 96;
  p.theta = 10000.0;
  const std::vector<float> base = Frequencies(p);
  p.scaling = RopeScaling::kLinear;
  p.factor = 3.0;
  const std::vector<float> scaled = Frequencies(p);
  for (std::size_t i = 0; i < base.size(); ++i) {
    EXPECT_FLOAT_EQ(scaled[i], static_cast<float>(base[i] / 3.0)) << i;
  }
}

// Dynamic NTK: the plain table up to L0; past it, theta grows with the length, so every frequency
// but the first (which is 1 for any theta) falls as the sequence grows.
TEST(RopeTest, DynamicGrowsThetaPastTheOriginalLength) {
  RopeParams p;
  p.head_dim = 64;
  p.theta = 10000.0;
  p.scaling = RopeScaling::kDynamic;
  p.factor = 4.0;
  p.original_max_position_embeddings = 512.0;
  RopeParams plain = p;
  plain.scaling = RopeScaling::kNone;
  const std::vector<float> base = Frequencies(plain);
  EXPECT_EQ(Frequencies(p), base);  // the table of sequences up to L0
  std::vector<float> at(32), prev = base;
  for (std::int64_t len : {1, 300, 512}) {
    RopeDynamicInvFrequencies(p, len, at.data());
    EXPECT_EQ(at, base) << len;
  }
  for (std::int64_t len : {513, 1000, 4096}) {
    RopeDynamicInvFrequencies(p, len, at.data());
    RopeParams grown = plain;
    grown.theta = 10000.0 * std::pow(4.0 * len / 512.0 - 3.0, 64.0 / 62.0);
    EXPECT_EQ(at, Frequencies(grown)) << len;
    EXPECT_EQ(at[0], 1.0f);
    for (std::size_t i = 1; i < at.size(); ++i) EXPECT_LT(at[i], prev[i]) << len << " " << i;
    prev = at;
  }
}

// YaRN: high frequencies (many turns over the original context) kept, low ones divided by the
// factor, a linear ramp over the dimensions in between.
TEST(RopeTest, YarnRampsFromExtrapolationToInterpolation) {
  RopeParams p;
  p.head_dim = 128;
  p.theta = 1000000.0;
  p.scaling = RopeScaling::kYarn;
  p.factor = 4.0;
  p.original_max_position_embeddings = 32768.0;
  RopeParams plain = p;
  plain.scaling = RopeScaling::kNone;
  const std::vector<float> base = Frequencies(plain), yarn = Frequencies(p);
  // The correction range: d ln(L / (2 pi beta)) / (2 ln theta), floored / ceiled.
  const auto dim_of = [](double beta) {
    return 128.0 * std::log(32768.0 / (beta * 2 * std::numbers::pi)) / (2 * std::log(1e6));
  };
  const double low = std::floor(dim_of(32.0)), high = std::ceil(dim_of(1.0));
  ASSERT_LT(low, high);
  for (std::size_t i = 0; i < base.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    EXPECT_NEAR(yarn[i], base[i] / 4.0 * ramp + base[i] * (1 - ramp), base[i] * 1e-6) << i;
    if (i <= low) {
      EXPECT_EQ(yarn[i], base[i]) << i;
    }
    if (i >= high) {
      EXPECT_FLOAT_EQ(yarn[i], static_cast<float>(base[i] / 4.0)) << i;
    }
  }
  // Without truncation the ramp starts and ends between whole dimensions.
  p.truncate = false;
  const std::vector<float> smooth = Frequencies(p);
  const std::size_t first = static_cast<std::size_t>(std::ceil(dim_of(32.0)));
  EXPECT_LT(smooth[first], base[first]);
  EXPECT_NE(smooth[first], yarn[first]);
}

// The attention factor multiplies cos and sin: the rotated vector scales by it.
TEST(RopeTest, ScaleMultipliesTheRotation) {
  std::mt19937_64 rng(302);
  const std::int64_t head_dim = 64, heads = 2, tokens = 5;
  const auto x = RandomFloats(rng, static_cast<std::size_t>(tokens * heads * head_dim));
  const std::vector<std::int32_t> pos = {0, 1, 19, 4000, 65000};
  RopeParams p;
  p.head_dim = head_dim;
  const std::vector<float> inv = Frequencies(p);
  auto plain = x, scaled = x;
  ApplyRope(plain.data(), tokens, heads, head_dim, heads * head_dim, pos.data(), inv.data(), 1.0f);
  ApplyRope(scaled.data(), tokens, heads, head_dim, heads * head_dim, pos.data(), inv.data(),
            1.1386294f);
  std::vector<double> expected(plain.begin(), plain.end());
  for (double& e : expected) e *= 1.1386294;
  EXPECT_TRUE(CheckClose(scaled, expected, 1e-6, 302));
  EXPECT_NE(scaled, plain);
}

}  // namespace
}  // namespace inflight::kernels::cpu
