// One warp step of the decode attention kernels (paged_attention_decode_impl.cuh): where K and V
// sit in the mma fragments, the warp's running softmax state, and the step's products. Internal to
// src/kernels/cuda.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_attention_decode_fragments.cuh"

namespace inflight::kernels::cuda::detail {

constexpr int kDecStepKeys = 16;  // keys per warp step: the M side of one mma
constexpr int kDecTileHeads = 8;  // query heads per block: the N side of one mma

// Where the head-dim elements of K and V rows sit in the mma fragments. The order of the reduction
// index of an mma is free as long as both operands use the same one, and the order of O's rows is
// free as long as the output goes back to its place, so each lane loads contiguous pieces:
//  - K (A of S^T = K Q^T, k = head dim): lane (g, q) loads dims [32p + 8q, +8) of key rows g and
//    g + 8 for p < D / 32; the first four feed k-step 2p, the last four k-step 2p + 1. When
//    D % 32 == 16 an 8-byte tail [32 * kKPieces + 4q, +4) feeds one more k-step. Q^T (B) likewise.
//  - V (A of O^T = V^T P^T, m = head dim): lane (g, q) loads dims [64h + 8g, +8) of its four key
//    rows (2q, 2q + 1, 2q + 8, 2q + 9) for h < D / 64; word w of piece h holds rows g and g + 8 of
//    m-tile 4h + w. A tail of W = (D % 64) / 16 words at [64 * kVPieces + 2Wg, +2W) holds m-tiles
//    4 * kVPieces + w.
template <int D>
struct DecodeLayout {
  static_assert(D % 16 == 0 && D % 64 != 48 && D <= 256, "head dim: D % 64 in {0, 16, 32}");
  static constexpr int kKPieces = D / 32;
  static constexpr bool kKTail = D % 32 != 0;
  static constexpr int kVPieces = D / 64;
  static constexpr int kVTailWords = (D % 64) / 16;
  static constexpr int kMTiles = D / 16;

  // The head dim held by row i (0..15) of m-tile t of O^T.
  __device__ static constexpr int Dim(int t, int i) {
    return t < 4 * kVPieces
               ? 64 * (t / 4) + 8 * (i % 8) + 2 * (t % 4) + i / 8
               : 64 * kVPieces + 2 * kVTailWords * (i % 8) + 2 * (t - 4 * kVPieces) + i / 8;
  }
};

// One warp step's K and V in registers (see DecodeLayout).
template <int D>
struct DecodeStepRegs {
  using L = DecodeLayout<D>;
  uint4 k[2][L::kKPieces];  // key rows g, g + 8
  uint2 k_tail[2];
  uint4 v[4][L::kVPieces];  // key rows 2q, 2q + 1, 2q + 8, 2q + 9
  std::uint32_t v_tail[4][L::kVTailWords > 0 ? L::kVTailWords : 1];

  // Word c (0..3) of K piece p of key row i (0: row g, 1: row g + 8), and word c (0..1) of its
  // tail.
  __device__ __forceinline__ std::uint32_t KWord(int i, int p, int c) const {
    const uint4& piece = k[i][p];
    return c == 0 ? piece.x : c == 1 ? piece.y : c == 2 ? piece.z : piece.w;
  }
  __device__ __forceinline__ std::uint32_t KTailWord(int i, int c) const {
    return c == 0 ? k_tail[i].x : k_tail[i].y;
  }

  // Word of m-tile t (rows g, g + 8) of V key row i.
  __device__ __forceinline__ std::uint32_t VWord(int i, int t) const {
    if (t >= 4 * L::kVPieces) return v_tail[i][t - 4 * L::kVPieces];
    const uint4& piece = v[i][t / 4];
    switch (t % 4) {
      case 0:
        return piece.x;
      case 1:
        return piece.y;
      case 2:
        return piece.z;
      default:
        return piece.w;
    }
  }
};

// One warp's running attention over its steps: O^T fragments and, per query head 2q and 2q + 1 of
// the tile, the running max (base 2, shared by the lanes of one q) and this lane's part of the sum.
template <int D>
struct DecodeWarpState {
  float o[DecodeLayout<D>::kMTiles][4];
  float m[2];
  float l[2];

  __device__ __forceinline__ void Reset() {
#pragma unroll
    for (int t = 0; t < DecodeLayout<D>::kMTiles; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.0f;
  }
};

// One step's products and online softmax. M: the mma's element type (the query fragments', and
// P's); r: the step's K and V words as M pairs (DecodeStepRegs, or a cache of codes widening them
// as they are asked for: KWord, KTailWord, VWord).
template <typename M, int D, typename Regs>
__device__ __forceinline__ void DecodeComputeStep(DecodeWarpState<D>& st, const Regs& r,
                                                  const uint4* qf, uint2 qf_tail, float scale_log2,
                                                  int base, int k_end, int g) {
  using L = DecodeLayout<D>;
  // S^T (keys g, g + 8 x heads 2q, 2q + 1) in two partial sums, so that the mma chain is half as
  // long.
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f}, s_odd[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int p = 0; p < L::kKPieces; ++p) {
    MmaM16N8K16<M>(s, r.KWord(0, p, 0), r.KWord(1, p, 0), r.KWord(0, p, 1), r.KWord(1, p, 1),
                   qf[p].x, qf[p].y);
    MmaM16N8K16<M>(s_odd, r.KWord(0, p, 2), r.KWord(1, p, 2), r.KWord(0, p, 3), r.KWord(1, p, 3),
                   qf[p].z, qf[p].w);
  }
  if constexpr (L::kKTail) {
    MmaM16N8K16<M>(s_odd, r.KTailWord(0, 0), r.KTailWord(1, 0), r.KTailWord(0, 1),
                   r.KTailWord(1, 1), qf_tail.x, qf_tail.y);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) s[i] = (s[i] + s_odd[i]) * scale_log2;
  if (base + kDecStepKeys > k_end) {  // the split's last step: keys past its end weigh nothing
    if (base + g >= k_end) s[0] = s[1] = -INFINITY;
    if (base + g + 8 >= k_end) s[2] = s[3] = -INFINITY;
  }
  float step_max[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int offset = 4; offset < 32; offset <<= 1)
      step_max[j] = fmaxf(step_max[j], __shfl_xor_sync(0xffffffffu, step_max[j], offset));
  }
  float alpha[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    // The step's first key is always in range, so the new max is finite and exp2 of the old (-inf
    // at first) minus it is a plain 0.
    const float m_new = fmaxf(st.m[j], step_max[j]);
    alpha[j] = exp2f(st.m[j] - m_new);
    st.m[j] = m_new;
  }
  const float p00 = exp2f(s[0] - st.m[0]), p01 = exp2f(s[1] - st.m[1]);
  const float p10 = exp2f(s[2] - st.m[0]), p11 = exp2f(s[3] - st.m[1]);
  st.l[0] = st.l[0] * alpha[0] + p00 + p10;
  st.l[1] = st.l[1] * alpha[1] + p01 + p11;
  // P^T as B of O^T = V^T P^T: the transposes of the (key, head) fragments of S^T.
  const std::uint32_t pb0 = Transpose8x8(PackPair<M>(p00, p01));
  const std::uint32_t pb1 = Transpose8x8(PackPair<M>(p10, p11));
#pragma unroll
  for (int t = 0; t < L::kMTiles; ++t) {
    st.o[t][0] *= alpha[0];
    st.o[t][1] *= alpha[1];
    st.o[t][2] *= alpha[0];
    st.o[t][3] *= alpha[1];
    const std::uint32_t w0 = r.VWord(0, t), w1 = r.VWord(1, t);
    const std::uint32_t w2 = r.VWord(2, t), w3 = r.VWord(3, t);
    MmaM16N8K16<M>(st.o[t], LowHalves(w0, w1), HighHalves(w0, w1), LowHalves(w2, w3),
                   HighHalves(w2, w3), pb0, pb1);
  }
}

}  // namespace inflight::kernels::cuda::detail
