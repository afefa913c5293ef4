// RoPE: rotation as complex multiplication, relative-position invariance, and llama3 frequencies.
#include <gtest/gtest.h>

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
      ApplyRope(y.data(), tokens, heads, head_dim, stride, pos.data(), inv_freq.data());
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
    params.llama3 = true;
    std::vector<float> inv_freq(head_dim / 2);
    RopeInvFrequencies(params, inv_freq.data());
    auto dot_at = [&](std::int32_t pq, std::int32_t pk) {
      auto a = q, b = k;
      ApplyRope(a.data(), 1, 1, head_dim, head_dim, &pq, inv_freq.data());
      ApplyRope(b.data(), 1, 1, head_dim, head_dim, &pk, inv_freq.data());
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
  p.llama3 = true;
  p.factor = 8.0;
  p.low_freq_factor = 1.0;
  p.high_freq_factor = 4.0;
  p.original_max_position_embeddings = 8192.0;
  RopeParams plain = p;
  plain.llama3 = false;
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

}  // namespace
}  // namespace inflight::kernels::cpu
