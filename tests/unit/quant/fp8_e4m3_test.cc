// FP8 E4M3 conversion (common/fp8_e4m3.h) over all 256 codes: decoding against the format's
// definition computed another way, encoding of every code's value, of every midpoint between
// neighbours (ties to even), and saturation.
#include "common/fp8_e4m3.h"

#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace inflight
