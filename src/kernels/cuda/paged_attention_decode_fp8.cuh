// The decode kernels' warp steps over an FP8 KV cache (paged_attention_decode_impl.cuh,
// paged_attention_decode_bulk.cuh): the same fragment layout as DecodeStepRegs (DecodeLayout), each
// 16-byte piece of T loaded as the 8 bytes of its codes (from the pools one step ahead of the one
// computing, or from the bulk kernel's stages). The products run in fp16 whatever T is: a pair of
// codes widens to an fp16 pair in one conversion, exactly (fp8_kv.cuh DecodeFp8x2), as the mma asks
// for it, where bf16 would take three more instructions a pair and a register file of widened steps
// (the kernel held 231 registers a thread that way). The codes' scales stay outside the mma:
// k_scale in the launch's scale_log2, v_scale on the output (DecodeMergeWarpsAndStore). Head dims
// that are a multiple of 64 (no 8-byte or 4-byte tails). Included by
// paged_attention_decode_impl.cuh.
#pragma once

#include <type_traits>

#include "kernels/cuda/fp8_kv.cuh"

namespace inflight::kernels::cuda::detail {

// Pair w (0..3) of eight codes, in the low 16 bits of the result (the bits DecodeFp8x2 reads).
__device__ __forceinline__ std::uint32_t Fp8CodePair(const uint2& codes, int w) {
  const std::uint32_t word = w < 2 ? codes.x : codes.y;
  return (w & 1) != 0 ? word >> 16 : word;
}

template <int D>
struct DecodeFp8StepRegs {
  using L = DecodeLayout<D>;
  static_assert(D % 64 == 0, "an FP8 KV cache's decode kernel takes head dims 64, 128, ...");
  uint2 k[2][L::kKPieces];  // key rows g, g + 8: dims [32p + 8q, +8)
  uint2 v[4][L::kVPieces];  // key rows 2q, 2q + 1, 2q + 8, 2q + 9: dims [64h + 8g, +8)

  // DecodeStepRegs' words, widened to fp16 pairs as DecodeComputeStep reads them.
  __device__ __forceinline__ std::uint32_t KWord(int i, int p, int c) const {
    return DecodeFp8x2<__half>(Fp8CodePair(k[i][p], c));
  }
  __device__ __forceinline__ std::uint32_t VWord(int i, int t) const {
    return DecodeFp8x2<__half>(Fp8CodePair(v[i][t / 4], t % 4));
  }
};

template <typename T, int D>
struct DecodeSteps<T, Fp8Code, D> {
  using L = DecodeLayout<D>;
  using Regs = DecodeFp8StepRegs<D>;

  // The query fragments as fp16. A bf16 query is first scaled by 2^e so that its largest element
  // lies in [2^14, 2^15): every bf16 value from 2^-14 of that largest up converts exactly (8
  // significant bits of fp16's 11), none overflows, and the scores get 2^-e back in scale_log2.
  // Every warp of the block loads the same tile of queries, so each finds the same e on its own.
  __device__ static __forceinline__ float PrepareQuery(uint4* qf, uint2& /*qf_tail*/,
                                                       float scale_log2) {
    if constexpr (std::is_same_v<T, __half>) {
      return scale_log2;
    } else {
      float largest = 0.0f;
#pragma unroll
      for (int p = 0; p < L::kKPieces; ++p) {
        Vec8<T> v;
        v.bits = qf[p];
#pragma unroll
        for (int j = 0; j < 8; ++j) largest = fmaxf(largest, fabsf(ToFloat(v.e[j])));
      }
      largest = WarpMax(largest);
      int e = 0;
      if (largest > 0.0f && largest < INFINITY) {  // zero, inf or NaN queries keep e = 0
        const int exponent = static_cast<int>((__float_as_uint(largest) >> 23) & 0xffu) - 127;
        e = min(126, max(-126, 14 - exponent));
      }
      const float up = __uint_as_float(static_cast<std::uint32_t>(127 + e) << 23);
      const float down = __uint_as_float(static_cast<std::uint32_t>(127 - e) << 23);
#pragma unroll
      for (int p = 0; p < L::kKPieces; ++p) {
        Vec8<T> v;
        v.bits = qf[p];
        Vec8<__half> h;
#pragma unroll
        for (int j = 0; j < 8; ++j) h.e[j] = __float2half_rn(ToFloat(v.e[j]) * up);
        qf[p] = h.bits;
      }
      return scale_log2 * down;
    }
  }

  // DecodeLoadStep's loads, a byte an element: row_of(i) is the row of the step's key i.
  template <typename Src, typename RowOf>
  __device__ static __forceinline__ void Load(Regs& r, RowOf row_of, const Fp8Code* k_rows,
                                              const Fp8Code* v_rows, int g, int q) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const Fp8Code* k = k_rows + static_cast<std::size_t>(row_of(g + 8 * i)) * D;
#pragma unroll
      for (int p = 0; p < L::kKPieces; ++p) r.k[i][p] = Src::Load8(k + 32 * p + 8 * q);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const Fp8Code* v =
          v_rows + static_cast<std::size_t>(row_of(2 * q + (i & 1) + 8 * (i >> 1))) * D;
#pragma unroll
      for (int h = 0; h < L::kVPieces; ++h) r.v[i][h] = Src::Load8(v + 64 * h + 8 * g);
    }
  }

  // DecodeFetchStep's: from the pools, lane i holding the pool row of the step's key i % 16.
  __device__ static __forceinline__ void Fetch(Regs& r, std::uint32_t rows, const Fp8Code* k_pool,
                                               const Fp8Code* v_pool, int g, int q) {
    Load<DecodeGlobalRows>(
        r, [&](int key) { return __shfl_sync(0xffffffffu, rows, key); }, k_pool, v_pool, g, q);
  }

  __device__ static __forceinline__ void Compute(DecodeWarpState<D>& st, const Regs& r,
                                                 const uint4* qf, uint2 qf_tail, float scale_log2,
                                                 int base, int k_end, int g) {
    DecodeComputeStep<__half, D>(st, r, qf, qf_tail, scale_log2, base, k_end, g);
  }
};

}  // namespace inflight::kernels::cuda::detail
