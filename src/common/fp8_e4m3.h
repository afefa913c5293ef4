// FP8 E4M3 ("e4m3fn", the OCP 8-bit float that NVIDIA's Hopper FP8 GEMMs and
// torch.float8_e4m3fn use): 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits; no infinities,
// S.1111.111 is NaN, the largest finite value 448 (0x7e), the smallest subnormal 2^-9.
//
//   code = s eeee mmm:  e = 0: (-1)^s * m/8 * 2^-6      e = 1..15: (-1)^s * (1 + m/8) * 2^(e-7)
//
// One place for the conversion: the builder's quantizer, the checkpoint readers and the CPU
// runner's dequantization all go through these two functions (tests/unit/common/fp8_e4m3_test.cc
// checks all 256 codes).
#pragma once

#include <cmath>
#include <cstdint>

namespace inflight {

inline constexpr float kFp8E4M3Max = 448.0f;

inline float Fp8E4M3ToFloat(std::uint8_t code) {
  const bool negative = (code & 0x80u) != 0;
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = std::nanf("");
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // m/8 * 2^-6
  } else {
    magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);  // (8+m)/8 * 2^(e-7)
  }
  return negative ? -magnitude : magnitude;
}

// Round to nearest, ties to even mantissa; magnitudes past 448 (infinities included) saturate to
// ±448, as a saturating cast (cuda_fp8.h's __NV_SATFINITE, what FP8 quantizers clamp to); NaN
// stays NaN (0x7f, the sign kept).
inline std::uint8_t FloatToFp8E4M3(float value) {
  const std::uint8_t sign = std::signbit(value) ? 0x80u : 0x00u;
  if (std::isnan(value)) return static_cast<std::uint8_t>(sign | 0x7fu);
  const float a = std::fabs(value);
  if (a >= kFp8E4M3Max) return static_cast<std::uint8_t>(sign | 0x7eu);
  // Below 2^-6 the codes are the subnormals m * 2^-9, m in [0, 8]; m = 8 is code 0x08 = 2^-6, the
  // smallest normal, so rounding up into the normals needs no special case.
  if (a < 0.015625f) {
    const auto m = static_cast<std::uint8_t>(std::nearbyint(std::ldexp(a, 9)));
    return static_cast<std::uint8_t>(sign | m);
  }
  int e2 = 0;
  std::frexp(a, &e2);     // a = f * 2^e2, f in [0.5, 1): the unbiased exponent is e2 - 1
  int exponent = e2 - 1;  // in [-6, 8]
  // The significand in eighths, [8, 16): nearbyint rounds ties to even under the default mode.
  auto q = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - exponent)));
  if (q == 16) {
    q = 8;
    ++exponent;
  }
  const int code = ((exponent + 7) << 3) | (q - 8);
  // Unreachable below 448 (the largest q there is 14 at exponent 8), kept so no input can give NaN.
  return static_cast<std::uint8_t>(sign | (code > 0x7e ? 0x7e : code));
}

}  // namespace inflight
