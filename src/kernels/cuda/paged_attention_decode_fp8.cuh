// The decode kernel's warp steps over an FP8 KV cache (paged_batch.h KvFp8Scales): the same
// fragment layout as DecodeStepRegs (DecodeLayout), each 16-byte piece of T loaded as the 8 bytes
// of its codes, one step ahead of the one computing (so the loads in flight cover twice the keys
// of a T cache's), and widened to T (exactly: fp8_kv.cuh DecodeFp8x8) when its step computes. The
// codes' scales stay outside the mma: k_scale in the launch's scale_log2, v_scale on the output
// (DecodeMergeWarpsAndStore). Head dims that are a multiple of 64 (no 8-byte or 4-byte tails).
// Included by paged_attention_decode_impl.cuh.
#pragma once

#include "kernels/cuda/fp8_kv.cuh"

namespace inflight::kernels::cuda::detail {

template <int D>
struct DecodeFp8StepRegs {
  using L = DecodeLayout<D>;
  static_assert(D % 64 == 0, "an FP8 KV cache's decode kernel takes head dims 64, 128, ...");
  uint2 k[2][L::kKPieces];  // key rows g, g + 8: dims [32p + 8q, +8)
  uint2 v[4][L::kVPieces];  // key rows 2q, 2q + 1, 2q + 8, 2q + 9: dims [64h + 8g, +8)
};

template <typename T, int D>
struct DecodeSteps<T, Fp8Code, D> {
  using L = DecodeLayout<D>;
  using Regs = DecodeFp8StepRegs<D>;

  // DecodeFetchStep's loads, a byte an element.
  __device__ static __forceinline__ void Fetch(Regs& r, std::uint32_t rows, const Fp8Code* k_pool,
                                               const Fp8Code* v_pool, int g, int q) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const std::uint32_t row = __shfl_sync(0xffffffffu, rows, g + 8 * i);
      const Fp8Code* k = k_pool + static_cast<std::size_t>(row) * D;
#pragma unroll
      for (int p = 0; p < L::kKPieces; ++p) r.k[i][p] = LoadStream8(k + 32 * p + 8 * q);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const std::uint32_t row = __shfl_sync(0xffffffffu, rows, 2 * q + (i & 1) + 8 * (i >> 1));
      const Fp8Code* v = v_pool + static_cast<std::size_t>(row) * D;
#pragma unroll
      for (int h = 0; h < L::kVPieces; ++h) r.v[i][h] = LoadStream8(v + 64 * h + 8 * g);
    }
  }

  __device__ static __forceinline__ void Compute(DecodeWarpState<D>& st, const Regs& r,
                                                 const uint4* qf, uint2 qf_tail, float scale_log2,
                                                 int base, int k_end, int g) {
    DecodeStepRegs<D> wide;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int p = 0; p < L::kKPieces; ++p) wide.k[i][p] = DecodeFp8x8<T>(r.k[i][p]);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int h = 0; h < L::kVPieces; ++h) wide.v[i][h] = DecodeFp8x8<T>(r.v[i][h]);
    DecodeComputeStep<T, D>(st, wide, qf, qf_tail, scale_log2, base, k_end, g);
  }
};

}  // namespace inflight::kernels::cuda::detail
