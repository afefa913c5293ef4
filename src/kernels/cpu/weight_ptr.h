// A read-only pointer to weights kept in their stored dtype (fp32, fp16 or bf16); reads give fp32.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/dtype.h"

namespace inflight::kernels::cpu {

// fp16 -> fp32 by bit manipulation: the weight paths call this per element, so it avoids the
// ldexp-based common::Fp16ToFloat (which the tests use to check this one).
inline float HalfBitsToFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (man << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {
    // Subnormal: shift the mantissa up until its leading 1 is the implicit bit.
    exp = 113u;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct WeightPtr {
  const void* data = nullptr;  // nullptr means "absent" (an optional bias, no learned positions)
  DType dtype = DType::kFloat32;

  WeightPtr() = default;
  WeightPtr(const void* d, DType t) : data(d), dtype(t) {}
  explicit WeightPtr(const float* d) : data(d), dtype(DType::kFloat32) {}

  explicit operator bool() const { return data != nullptr; }

  float Load(std::int64_t i) const {
    switch (dtype) {
      case DType::kFloat16:
        return HalfBitsToFloat(static_cast<const std::uint16_t*>(data)[i]);
      case DType::kBFloat16:
        return Bf16ToFloat(static_cast<const std::uint16_t*>(data)[i]);
      default:
        return static_cast<const float*>(data)[i];
    }
  }

  // dst[0, n) = element [offset, offset + n) as fp32.
  void LoadRange(std::int64_t offset, std::int64_t n, float* dst) const {
    switch (dtype) {
      case DType::kFloat16: {
        const auto* p = static_cast<const std::uint16_t*>(data) + offset;
        for (std::int64_t i = 0; i < n; ++i) dst[i] = HalfBitsToFloat(p[i]);
        break;
      }
      case DType::kBFloat16: {
        const auto* p = static_cast<const std::uint16_t*>(data) + offset;
        for (std::int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(p[i]);
        break;
      }
      default:
        std::memcpy(dst, static_cast<const float*>(data) + offset,
                    static_cast<std::size_t>(n) * sizeof(float));
    }
  }
};

// True for the dtypes a WeightPtr can read.
inline bool IsWeightDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

}  // namespace inflight::kernels::cpu
