// FP8 KV-cache codes on the device (docs/engine_format.md, "An FP8 KV cache"): a pool element is
// the E4M3 byte of value / scale, saturating at ±448 and rounded to nearest even, the conversion of
// common/fp8_e4m3.h FloatToFp8E4M3 (the CPU runner's). Internal to src/kernels/cuda.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {

// The element type of an FP8 pool (a template argument beside fp16 / bf16 pools).
using Fp8Code = std::uint8_t;

// e4m3(x / scale). NOTE: a division, not a multiply by 1 / scale, so that the code is the CPU
// reference's bit for bit (__fdiv_rn: IEEE division whatever the compile flags).
__device__ __forceinline__ Fp8Code EncodeFp8(float x, float scale) {
  return static_cast<Fp8Code>(
      __nv_cvt_float_to_fp8(__fdiv_rn(x, scale), __NV_SATFINITE, __NV_E4M3));
}

// Eight T values (16 bytes) to eight codes (8 bytes), element 0 in the lowest byte.
template <typename T>
__device__ __forceinline__ uint2 EncodeFp8x8(const uint4& bits, float scale) {
  Vec8<T> v;
  v.bits = bits;
  std::uint32_t word[2] = {0u, 0u};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    word[j / 4] |= static_cast<std::uint32_t>(EncodeFp8(ToFloat(v.e[j]), scale)) << (8 * (j % 4));
  }
  return make_uint2(word[0], word[1]);
}

// Two codes (the low byte first) as two T values packed in a word, exactly: every E4M3 value is an
// fp16 and a bf16 value (3 mantissa bits, exponents 2^-9 .. 2^8).
template <typename T>
__device__ __forceinline__ std::uint32_t DecodeFp8x2(std::uint32_t two_codes) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes), __NV_E4M3);
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<std::uint32_t>(h.x) | (static_cast<std::uint32_t>(h.y) << 16);
  } else {
    const float2 f = __half22float2(__half2(h));
    return PackPair<T>(f.x, f.y);
  }
}

// Eight codes (8 bytes) as eight T values (16 bytes), in order.
template <typename T>
__device__ __forceinline__ uint4 DecodeFp8x8(const uint2& codes) {
  return make_uint4(DecodeFp8x2<T>(codes.x & 0xffffu), DecodeFp8x2<T>(codes.x >> 16),
                    DecodeFp8x2<T>(codes.y & 0xffffu), DecodeFp8x2<T>(codes.y >> 16));
}

}  // namespace inflight::kernels::cuda
