// FP8 E4M3 conversion (common/fp8_e4m3.h) over all 256 codes: decoding against the format's
// definition computed another way, encoding of every code's value, of every midpoint between
// neighbours (ties to even), of sampled floats of every range against a search, and saturation.
#include "common/fp8_e4m3.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace inflight {
namespace {

// The definition, by powers: sign, exponent e (bias 7), mantissa m; e = 0 subnormal.
double Reference(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? (m / 8.0) * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -mag : mag;
}

TEST(Fp8E4M3, DecodesEveryCodeAsDefined) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const double ref = Reference(c);
    const float got = Fp8E4M3ToFloat(static_cast<std::uint8_t>(c));
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
      ++nans;
    } else {
      EXPECT_EQ(static_cast<double>(got), ref) << "code " << c;
    }
  }
  EXPECT_EQ(nans, 2);  // 0x7f and 0xff only: no infinities
  EXPECT_EQ(Fp8E4M3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(Fp8E4M3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(Fp8E4M3ToFloat(0x08), std::ldexp(1.0f, -6));
}

TEST(Fp8E4M3, EncodesEveryCodeBackToItself) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(FloatToFp8E4M3(Fp8E4M3ToFloat(static_cast<std::uint8_t>(c))), c) << "code " << c;
  }
  EXPECT_EQ(FloatToFp8E4M3(-0.0f), 0x80);
}

// Between neighbouring codes a and a + 1 (same sign): just below the midpoint rounds to a, just
// above to a + 1, the midpoint itself to the one with an even mantissa.
TEST(Fp8E4M3, RoundsToNearestWithTiesToEven) {
  int ties = 0;
  for (int sign = 0; sign < 2; ++sign) {
    for (int c = 0; c < 0x7e; ++c) {
      const int a = (sign << 7) | c, b = a + 1;
      const double lo = Reference(a), hi = Reference(b);
      const double mid = (lo + hi) / 2;
      const float below = std::nextafter(static_cast<float>(mid), static_cast<float>(lo));
      const float above = std::nextafter(static_cast<float>(mid), static_cast<float>(hi));
      ASSERT_EQ(static_cast<double>(static_cast<float>(mid)), mid) << "midpoint not exact";
      EXPECT_EQ(FloatToFp8E4M3(below), a) << "below the midpoint of " << a << ", " << b;
      EXPECT_EQ(FloatToFp8E4M3(above), b) << "above the midpoint of " << a << ", " << b;
      const int even = (a & 1) == 0 ? a : b;
      EXPECT_EQ(FloatToFp8E4M3(static_cast<float>(mid)), even) << "tie of " << a << ", " << b;
      ++ties;
    }
  }
  EXPECT_EQ(ties, 2 * 0x7e);
}

TEST(Fp8E4M3, SaturatesAt448AndKeepsNan) {
  for (float v : {448.0f, 449.0f, 464.0f, 479.0f, 480.0f, 1e6f, INFINITY}) {
    EXPECT_EQ(FloatToFp8E4M3(v), 0x7e) << v;
    EXPECT_EQ(FloatToFp8E4M3(-v), 0xfe) << -v;
  }
  EXPECT_EQ(FloatToFp8E4M3(NAN) & 0x7f, 0x7f);
  // Below half the smallest subnormal: zero; at exactly half, ties to even (zero).
  EXPECT_EQ(FloatToFp8E4M3(std::ldexp(1.0f, -11)), 0x00);
  EXPECT_EQ(FloatToFp8E4M3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(FloatToFp8E4M3(std::ldexp(1.5f, -10)), 0x01);
}

// Arbitrary floats (every 65,537th bit pattern, both signs, NaNs and infinities included): the
// code of the nearest value by the definition, found by search (ties to the even mantissa;
// past 448 saturating), as the encoder's bit arithmetic must give.
TEST(Fp8E4M3, EncodesSampledFloatsToTheNearestCode) {
  int checked = 0;
  for (std::uint64_t bits = 0; bits < (1ull << 32); bits += 65537) {
    const auto u = static_cast<std::uint32_t>(bits);
    float f;
    std::memcpy(&f, &u, sizeof f);
    const int sign = (u >> 31) ? 0x80 : 0;
    int want;
    if (std::isnan(f)) {
      want = sign | 0x7f;
    } else if (std::fabs(f) >= 448.0f) {
      want = sign | 0x7e;
    } else {
      want = -1;
      double best = INFINITY;
      for (int c = 0; c <= 0x7e; ++c) {
        const double d = std::fabs(std::fabs(static_cast<double>(f)) - Reference(c));
        if (d < best || (d == best && (c & 1) == 0)) best = d, want = sign | c;
      }
    }
    ASSERT_EQ(FloatToFp8E4M3(f), want) << "float bits 0x" << std::hex << u;
    ++checked;
  }
  EXPECT_GT(checked, 65000);
}

}  // namespace
}  // namespace inflight
