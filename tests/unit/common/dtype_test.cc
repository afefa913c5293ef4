#include "common/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace inflight {
namespace {

TEST(DType, HalfConversionsRoundTripEveryFiniteValue) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = Fp16ToFloat(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToFp16(f), bits) << "fp16 bits " << h << " value " << f;
    ASSERT_EQ(FloatToBf16(Bf16ToFloat(bits)), bits) << "bf16 bits " << h;
  }
}

TEST(DType, RoundsToNearestEven) {
  // 1 + 2^-11 lies exactly between two fp16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToFp16(70000.0f), 0x7c00);  // overflow to inf
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0, 3);
  for (int i = 0; i < 10000; ++i) {
    float x = d(rng);
    EXPECT_LE(std::fabs(Fp16ToFloat(FloatToFp16(x)) - x), std::fabs(x) * 1e-3f + 1e-7f) << x;
    EXPECT_LE(std::fabs(Bf16ToFloat(FloatToBf16(x)) - x), std::fabs(x) * 4e-3f) << x;
  }
}

TEST(DType, ParsesBothNamingSchemes) {
  EXPECT_EQ(ParseDType("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(ParseDType("BF16"), DType::kBFloat16);
  EXPECT_EQ(ParseDType("F16"), DType::kFloat16);
  EXPECT_FALSE(ParseDType("float8").has_value());
  EXPECT_STREQ(SafetensorsDTypeName(DType::kFloat32), "F32");
}

}  // namespace
}  // namespace inflight
