// The decode attention's split reduce: merges the partial outputs of a sequence's splits
// (DecodeAttentionKernel and DecodeBulkKernel with max_splits > 1). Included by
// paged_attention_decode_impl.cuh once DecodeArgs and DecodeNumSplits are defined.
#pragma once

namespace inflight::kernels::cuda::detail {

// Splits a warp loads at once: the block reads up to 64 splits in one round trip. With 8 (32 in
// one trip), 1 x 8192 on an H100 (43 splits) took 17.7 us; with 16, 16.1 us
// (bench/results/2026-11-22-h100-round-16-decode-chain.md).
constexpr int kDecReduceUnroll = 16;

// Grid: (num_heads, num_seqs), block: kDecThreads. Merges the splits of one (sequence, head):
// M = max m_i, out = sum_i o_i 2^(m_i - M) / sum_i l_i 2^(m_i - M). Warp w merges splits
// [16w, 16w + 16), [16w + 64, ...) online, a float4 of o_i per lane, kDecReduceUnroll splits' loads
// in flight at once; the warps' states merge in shared memory. Splits past the sequence's end were
// never written and are not read.
template <typename T, int D, bool kWindow>
__global__ void __launch_bounds__(kDecThreads) DecodeReduceKernel(DecodeArgs args) {
  constexpr int kVecs = D / 4;
  static_assert(D % 4 == 0 && kVecs <= 32, "one float4 of a row per lane");
  __shared__ float s_m[kDecWarps], s_l[kDecWarps];
  __shared__ float4 s_o[kDecWarps][kVecs];
  // The kernel after may launch at once: it waits for this one before it touches memory, and its
  // launch (or, for the next decode call, its copies of cached rows) then overlaps this merge.
  GridDependencyLaunchDependents();
  GridDependencyWait();
  const int h = static_cast<int>(blockIdx.x), s = static_cast<int>(blockIdx.y);
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int num_splits = DecodeNumSplits<kWindow>(args, args.batch.num_cached[s] + 1);
  const std::int64_t base = (static_cast<std::int64_t>(s) * args.num_heads + h) * args.max_splits;
  const float* ml = args.part_ml + base * 2;
  const float4* o_rows = reinterpret_cast<const float4*>(args.part_o + base * D);
  float m = -INFINITY, l = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int first = warp * kDecReduceUnroll; first < num_splits;
       first += kDecWarps * kDecReduceUnroll) {
    float mi[kDecReduceUnroll], li[kDecReduceUnroll];
    float4 oi[kDecReduceUnroll];
#pragma unroll
    for (int u = 0; u < kDecReduceUnroll; ++u) {
      const int i = first + u;
      const bool live = i < num_splits;
      mi[u] = live ? ml[2 * static_cast<std::ptrdiff_t>(i)] : -INFINITY;
      li[u] = live ? ml[2 * static_cast<std::ptrdiff_t>(i) + 1] : 0.0f;
      oi[u] = live && lane < kVecs ? o_rows[static_cast<std::int64_t>(i) * kVecs + lane]
                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kDecReduceUnroll; ++u) m_new = fmaxf(m_new, mi[u]);
    // Split `first` exists, so m_new is finite; the old max (-inf at first) weighs 0.
    const float alpha = exp2f(m - m_new);
    l *= alpha;
    acc.x *= alpha;
    acc.y *= alpha;
    acc.z *= alpha;
    acc.w *= alpha;
#pragma unroll
    for (int u = 0; u < kDecReduceUnroll; ++u) {
      const float w = exp2f(mi[u] - m_new);
      l += li[u] * w;
      acc.x += oi[u].x * w;
      acc.y += oi[u].y * w;
      acc.z += oi[u].z * w;
      acc.w += oi[u].w * w;
    }
    m = m_new;
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
  if (lane < kVecs) s_o[warp][lane] = acc;
  __syncthreads();
  T* out = static_cast<T*>(args.out) +
           (static_cast<std::int64_t>(args.batch.query_start[s]) * args.num_heads + h) * D;
  for (int d = static_cast<int>(threadIdx.x); d < D; d += kDecThreads) {
    float m_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecWarps; ++w) m_max = fmaxf(m_max, s_m[w]);
    float l_sum = 0.0f, o_sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecWarps; ++w) {
      const float weight = exp2f(s_m[w] - m_max);  // 0 for a warp that had no splits
      l_sum += s_l[w] * weight;
      o_sum += reinterpret_cast<const float*>(s_o[w])[d] * weight;
    }
    out[d] = FromFloat<T>(o_sum / l_sum);
  }
}

}  // namespace inflight::kernels::cuda::detail
