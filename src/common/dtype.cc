#include "common/dtype.h"

#include <cmath>

namespace inflight {

std::size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kBool:
    case DType::kFloat8E4M3:
      return 1;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kBool:
      return "bool";
    case DType::kFloat8E4M3:
      return "float8_e4m3fn";
  }
  return "?";
}

const char* SafetensorsDTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "F32";
    case DType::kFloat16:
      return "F16";
    case DType::kBFloat16:
      return "BF16";
    case DType::kInt32:
      return "I32";
    case DType::kInt64:
      return "I64";
    case DType::kUInt8:
      return "U8";
    case DType::kInt8:
      return "I8";
    case DType::kBool:
      return "BOOL";
    case DType::kFloat8E4M3:
      return "F8_E4M3";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view n) {
  if (n == "float32" || n == "F32" || n == "fp32") return DType::kFloat32;
  if (n == "float16" || n == "F16" || n == "fp16" || n == "half") return DType::kFloat16;
  if (n == "bfloat16" || n == "BF16" || n == "bf16") return DType::kBFloat16;
  if (n == "int32" || n == "I32") return DType::kInt32;
  if (n == "int64" || n == "I64") return DType::kInt64;
  if (n == "uint8" || n == "U8") return DType::kUInt8;
  if (n == "int8" || n == "I8") return DType::kInt8;
  if (n == "bool" || n == "BOOL") return DType::kBool;
  if (n == "float8_e4m3fn" || n == "F8_E4M3") return DType::kFloat8E4M3;
  return std::nullopt;
}

float Fp16ToFloat(std::uint16_t h) {
  const std::uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);  // subnormal (or zero)
  } else if (exp == 31) {
    v = man ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

std::uint16_t FloatToFp16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Subnormal in fp16: scale so the integer part is the mantissa, round to nearest even.
    float a;
    std::memcpy(&a, &abs, 4);
    const float scaled = a * 16777216.0f;  // 2^24
    const auto m = static_cast<std::uint32_t>(std::nearbyint(scaled));
    return static_cast<std::uint16_t>(sign | m);
  }
  const std::uint32_t exp = ((abs >> 23) - 112u) << 10;
  std::uint32_t man = (abs >> 13) & 0x3ffu;
  std::uint32_t h = exp | man;
  const std::uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into the exponent correctly
  return static_cast<std::uint16_t>(sign | h);
}

void ConvertToFloat(DType from, const void* src, float* dst, std::size_t n) {
  switch (from) {
    case DType::kFloat32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kFloat16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::size_t i = 0; i < n; ++i) dst[i] = Fp16ToFloat(s[i]);
      return;
    }
    case DType::kBFloat16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::size_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(s[i]);
      return;
    }
    default:
      return;
  }
}

void ConvertFromFloat(DType to, const float* src, void* dst, std::size_t n) {
  switch (to) {
    case DType::kFloat32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kFloat16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = FloatToFp16(src[i]);
      return;
    }
    case DType::kBFloat16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) d[i] = FloatToBf16(src[i]);
      return;
    }
    default:
      return;
  }
}

}  // namespace inflight
