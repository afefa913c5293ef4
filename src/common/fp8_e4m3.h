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
#include <cstring>

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
  // On the float's bits: a quantizing build converts every weight of the model, and the library
  // calls of a frexp / ldexp / nearbyint version made that most of an FP8 build's time.
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const auto sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7fu);   // NaN
  if (magnitude >= 0x43e00000u) return static_cast<std::uint8_t>(sign | 0x7eu);  // >= 448
  if (magnitude < 0x3c800000u) {
    // Below 2^-6 the codes are the subnormals m * 2^-9, m in [0, 8]; m = 8 is code 0x08 = 2^-6,
    // the smallest normal, so rounding up into the normals needs no special case. a * 2^9 is
    // exact; nearbyint rounds ties to even under the default mode.
    float a;
    std::memcpy(&a, &magnitude, sizeof a);
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(std::nearbyint(a * 512.0f)));
  }
  // Round the 23-bit mantissa to 3 bits, ties to even; a carry moves into the exponent. Bits
  // 30..20 are then exponent and mantissa, and the exponent's bias goes from 127 to 7.
  const std::uint32_t rounded = magnitude + 0x7ffffu + ((magnitude >> 20) & 1u);
  return static_cast<std::uint8_t>(sign | ((rounded >> 20) - (120u << 3)));
}

}  // namespace inflight
