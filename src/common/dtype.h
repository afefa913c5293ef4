// Element types of weights and activations, and exact conversions between fp32, fp16 and bf16.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace inflight {

enum class DType : std::uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt64,
  kUInt8,
  kInt8,
  kBool,
  // FP8 E4M3 ("e4m3fn": no infinities, 0x7f/0xff are NaN, largest finite 448): common/fp8_e4m3.h.
  kFloat8E4M3
};

std::size_t DTypeSize(DType t);
const char* DTypeName(DType t);  // "float32", "float16", "bfloat16", ...
// Accepts the builder's names (float32, float16, bfloat16) and safetensors' (F32, F16, BF16, I32,
// ...).
std::optional<DType> ParseDType(std::string_view name);
const char* SafetensorsDTypeName(DType t);  // "F32", "F16", "BF16", ...

inline float Bf16ToFloat(std::uint16_t h) {
  std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as PyTorch's .to(torch.bfloat16); NaN stays NaN.
inline std::uint16_t FloatToBf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

float Fp16ToFloat(std::uint16_t h);
std::uint16_t FloatToFp16(float f);  // round to nearest even; overflow goes to inf

// Converts n elements of `src` (type `from`) into fp32 `dst`. Only float types.
void ConvertToFloat(DType from, const void* src, float* dst, std::size_t n);
// Converts n fp32 elements into `to` (a float type).
void ConvertFromFloat(DType to, const float* src, void* dst, std::size_t n);

}  // namespace inflight
