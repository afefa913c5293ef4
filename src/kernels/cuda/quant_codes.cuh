// Device decoding of quantized weight codes (quant_weight.h), shared by the dequantize kernel and
// the quantized GEMV, and the FP8 activation codes' rules, shared by every kernel that makes them.
// Internal to src/kernels/cuda.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/quant_weight.h"

namespace inflight::kernels::cuda {

// E4M3 to float, saturating conversions aside exact (every E4M3 value is a half).
__device__ __forceinline__ float E4M3ToFloat(std::uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

// Round to nearest even, saturating at ±448 (common/fp8_e4m3.h's FloatToFp8E4M3).
__device__ __forceinline__ std::uint8_t FloatToE4M3(float v) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// An activation row's FP8 scale: the linear's static one when it has one (> 0), else the row's
// amax / 448 (1 for a row of zeros).
__device__ __forceinline__ float ActivationFp8Scale(float static_scale, float amax) {
  if (static_scale > 0.0f) return static_scale;
  return amax > 0.0f ? amax / 448.0f : 1.0f;
}

// Divides by one scale s many times, giving each quotient's E4M3 code as the true division's
// (__fdiv_rn, which the CPU reference's x / s matches) without paying for one: x * inv with inv =
// 1/s rounded to nearest, then one correction q + (x - q s) inv, which is the correctly rounded
// quotient when nothing over- or underflows (Markstein's theorem). The SwiGLU codes pass took 12%
// less time at 8,192 rows of the 8B for it (H200; the RMSNorm codes pass 1% more). The edges: an
// exact product keeps its signed zero; a product past the float range (NaN after the correction)
// keeps its infinity, which saturates to 448 as the true quotient does; for s outside [2^-90, 2^90]
// the true division. With s >= 2^-90, a residual small enough to lose bits belongs to a quotient
// below 2^-12, an E4M3 zero of the same sign either way.
struct ScaleDivider {
  float s, inv;
  bool fast;
  __device__ __forceinline__ static ScaleDivider For(float scale) {
    return {scale, __fdiv_rn(1.0f, scale), scale >= 0x1p-90f && scale <= 0x1p90f};
  }
  __device__ __forceinline__ float operator()(float x) const {
    if (!fast) return __fdiv_rn(x, s);
    const float q = x * inv;
    const float r = fmaf(-q, s, x);
    const float corrected = r == 0.0f ? q : fmaf(r, inv, q);
    return isnan(corrected) ? q : corrected;
  }
};

// 8 activations (already in their dtype) to their E4M3 codes under scale s: the codes of the true
// division x / s, as the CPU reference's (x * (1 / s) rounds differently), two a conversion.
template <typename T>
__device__ __forceinline__ uint2 ActivationCodes8(const Vec8<T>& v, float s) {
  const ScaleDivider div = ScaleDivider::For(s);
  union {
    uint2 bits;
    __nv_fp8x2_storage_t pair[4];
  } q;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    // NOTE: .x becomes the low byte, element 2j of the row.
    q.pair[j] = __nv_cvt_float2_to_fp8x2(
        make_float2(div(ToFloat(v.e[2 * j])), div(ToFloat(v.e[2 * j + 1]))), __NV_SATFINITE,
        __NV_E4M3);
  }
  return q.bits;
}

// An activation as the FP8 linear's dequantizing paths multiply it: its E4M3 code under scale s
// (ActivationCodes8's rounding) back in T, the value QuantizeActivationsFp8 writes in place.
template <typename T>
__device__ __forceinline__ float RoundedActivationFp8(float x, float s) {
  return ToFloat(FromFloat<T>(E4M3ToFloat(FloatToE4M3(__fdiv_rn(x, s))) * s));
}

// The FP8 GEMM epilogues' 8 column scales from column o on (per channel; 16-byte aligned), or
// the tensor's one 8 times.
__device__ __forceinline__ void LoadColumnScales8(const float* col_scales, bool per_channel, int o,
                                                  float (&cs)[8]) {
  if (per_channel) {
    const float4 lo = *reinterpret_cast<const float4*>(col_scales + o);
    const float4 hi = *reinterpret_cast<const float4*>(col_scales + o + 4);
    cs[0] = lo.x, cs[1] = lo.y, cs[2] = lo.z, cs[3] = lo.w;
    cs[4] = hi.x, cs[5] = hi.y, cs[6] = hi.z, cs[7] = hi.w;
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) cs[j] = col_scales[0];
  }
}

// The zero point of (row, group): stored, or the implicit 8 (int4) / 0 (int8, fp8).
template <QuantWeightKind kKind>
__device__ __forceinline__ float ZeroPoint(const std::uint8_t* zeros, std::int64_t at) {
  if constexpr (kKind == QuantWeightKind::kFp8E4M3) {
    return 0.0f;
  } else if constexpr (kKind == QuantWeightKind::kInt8) {
    return zeros != nullptr ? static_cast<float>(static_cast<std::int8_t>(zeros[at])) : 0.0f;
  } else {
    return zeros != nullptr ? static_cast<float>(zeros[at]) : 8.0f;
  }
}

// The code of byte `b`'s element `half` (int4: 0 the low nibble, 1 the high one) as a float.
template <QuantWeightKind kKind>
__device__ __forceinline__ float CodeValue(std::uint8_t b, int half) {
  if constexpr (kKind == QuantWeightKind::kFp8E4M3) {
    return E4M3ToFloat(b);
  } else if constexpr (kKind == QuantWeightKind::kInt8) {
    return static_cast<float>(static_cast<std::int8_t>(b));
  } else {
    return static_cast<float>((b >> (4 * half)) & 0xf);
  }
}

// Word i (0..3) of a 16-byte chunk.
__device__ __forceinline__ std::uint32_t Word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// 2^23 + b as a float from a byte b in the low byte: 0x4B000000 is 2^23, whose last mantissa
// byte the byte fills. One byte permute instead of an int-to-float conversion, which runs at a
// quarter of the FMA rate and would bound the int4 GEMV below the memory rate.
constexpr float kMagic = 8388608.0f;
__device__ __forceinline__ float MagicFloat(std::uint32_t word, int byte) {
  return __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7440u | static_cast<unsigned>(byte)));
}

// The 8 codes of columns [8 q, 8 q + 8) of a 16-byte chunk, as floats with the zero point
// subtracted (exactly: small integers).
template <QuantWeightKind kKind>
__device__ __forceinline__ void Decode8(const uint4& v, int q, float zero, float (&out)[8]) {
  if constexpr (kKind == QuantWeightKind::kInt4) {
    const std::uint32_t word = Word(v, q);
    // Byte j of `even` holds column 2j's code, of `odd` column 2j + 1's.
    const std::uint32_t even = word & 0x0f0f0f0fu, odd = (word >> 4) & 0x0f0f0f0fu;
    const float base = kMagic + zero;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      out[2 * j] = MagicFloat(even, j) - base;
      out[2 * j + 1] = MagicFloat(odd, j) - base;
    }
  } else if constexpr (kKind == QuantWeightKind::kInt8) {
    // Two's complement bytes b ^ 0x80 = b + 128 unsigned.
    const std::uint32_t lo = Word(v, 2 * q) ^ 0x80808080u, hi = Word(v, 2 * q + 1) ^ 0x80808080u;
    const float base = kMagic + 128.0f + zero;
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = MagicFloat(e < 4 ? lo : hi, e & 3) - base;
  } else {
    const std::uint32_t lo = Word(v, 2 * q), hi = Word(v, 2 * q + 1);
#pragma unroll
    for (int e = 0; e < 8; e += 2) {
      // Two E4M3 codes to two halves in one conversion (exact: E4M3 is a subset of fp16).
      const std::uint32_t word = e < 4 ? lo : hi;
      const auto pair = static_cast<__nv_fp8x2_storage_t>((word >> (8 * (e & 3))) & 0xffffu);
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
      const float2 f = __half22float2(__half2(h));
      out[e] = f.x - zero;
      out[e + 1] = f.y - zero;
    }
  }
}

// The scale group of input column i.
__device__ __forceinline__ std::int64_t GroupOf(const QuantWeight& w, std::int64_t i) {
  if (w.per_tensor) return 0;
  if (w.g_idx != nullptr) return w.g_idx[i];
  return w.group_size > 0 ? i / w.group_size : 0;
}

// The scale of (row o, group g).
__device__ __forceinline__ float ScaleOf(const QuantWeight& w, std::int64_t o, std::int64_t g) {
  return w.per_tensor ? w.scales[0] : w.scales[o * w.num_groups + g];
}

}  // namespace inflight::kernels::cuda
