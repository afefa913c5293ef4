// What the context attention kernels share: their arguments, the map from a CTA to its query tile,
// and the online-softmax step on score fragments in the mma accumulator layout.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_attention_context_ptx.cuh"
#include "kernels/cuda/paged_batch.h"

namespace inflight::kernels::cuda::detail {

struct ContextArgs {
  void* out;
  const void* q;
  std::int64_t q_token_stride;
  const void* k_pool;
  const void* v_pool;
  PagedBatch batch;
  int num_heads;
  int num_kv_heads;
  int tokens_per_block;
  float scale_log2;  // scale * log2(e) > 0: scores are kept in base 2 so that ex2 does the softmax
  // cpu::AttentionWindow: window > 0 launches the kWindow kernels, which visit only the key tiles
  // some row of the query tile sees; window 0 launches the full-attention ones (sink unused).
  int window;
  int sink;
  // An FP8 KV cache (MmaSyncContextFp8Kernel): the output's factor v_scale (k_scale is in
  // scale_log2). 1 for fp16 / bf16 pools, where no kernel reads it.
  float v_scale;
};

// Slots enumerate the query tiles sequence after sequence; within a sequence the last tile (the
// longest causal range) comes first, so that the grid starts its largest work first. Sets *seq to
// -1 past the last tile. Called by one whole warp.
__device__ __forceinline__ void FindQueryTile(const PagedBatch& batch, int tile_rows, int slot,
                                              int lane, int* seq, int* tile) {
  constexpr unsigned kAll = 0xffffffffu;
  int base = 0;  // tiles of the sequences before this chunk of 32
  for (int first = 0; first < batch.num_seqs; first += 32) {
    const int s = first + lane;
    int tiles = 0;
    if (s < batch.num_seqs) {
      tiles = (batch.query_start[s + 1] - batch.query_start[s] + tile_rows - 1) / tile_rows;
    }
    int inclusive = tiles;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int v = __shfl_up_sync(kAll, inclusive, offset);
      if (lane >= offset) inclusive += v;
    }
    const unsigned hit = __ballot_sync(kAll, base + inclusive > slot);
    if (hit != 0) {
      const int owner = __ffs(static_cast<int>(hit)) - 1;
      const int before = __shfl_sync(kAll, inclusive - tiles, owner);
      const int owner_tiles = __shfl_sync(kAll, tiles, owner);
      *seq = first + owner;
      *tile = owner_tiles - 1 - (slot - base - before);
      return;
    }
    base += __shfl_sync(kAll, inclusive, 31);
  }
  *seq = -1;
  *tile = 0;
}

// CTAs a context launch needs: query tiles of tile_rows rows times heads, counting at most one
// partial tile per sequence and at most max_query_len's tiles per sequence (slots past the last
// tile exit at once).
inline std::int64_t ContextGridBlocks(const ContextArgs& args, int tile_rows) {
  const PagedBatch& b = args.batch;
  const std::int64_t by_tokens = (static_cast<std::int64_t>(b.num_tokens) +
                                  static_cast<std::int64_t>(b.num_seqs) * (tile_rows - 1)) /
                                 tile_rows;
  const std::int64_t by_longest =
      static_cast<std::int64_t>(b.num_seqs) * ((b.max_query_len + tile_rows - 1) / tile_rows);
  return (by_tokens < by_longest ? by_tokens : by_longest) * args.num_heads;
}

// The query tile one context CTA computes, and where its sequence's keys live.
struct ContextTile {
  int head;
  int seq;
  int q_begin;  // the sequence's first row in the step
  int q0;       // the tile's first row within the sequence
  int rows;     // rows in the tile (the last tile of a sequence may be short)
  int pos0;     // position of the tile's first row
  int kv_end;   // the tile's rows see keys [0, kv_end)
  int kvh;
  const std::int32_t* table;  // the sequence's block table
};

// Which tile this CTA computes: blockIdx.x = slot * num_heads + head (head fastest, so that the
// heads sharing a kv head run side by side and share its K/V tiles in L2), slots as FindQueryTile
// orders them. False past the last tile. Every thread of the block calls it (it synchronises).
template <int kRows>
__device__ __forceinline__ bool LocateContextTile(const ContextArgs& args, ContextTile* t) {
  __shared__ int work[2];
  const PagedBatch& batch = args.batch;
  const int head = static_cast<int>(blockIdx.x % static_cast<unsigned>(args.num_heads));
  const int slot = static_cast<int>(blockIdx.x / static_cast<unsigned>(args.num_heads));
  if (threadIdx.x < 32) {
    int seq, tile;
    FindQueryTile(batch, kRows, slot, static_cast<int>(threadIdx.x), &seq, &tile);
    if (threadIdx.x == 0) {
      work[0] = seq;
      work[1] = tile;
    }
  }
  __syncthreads();
  t->seq = work[0];
  if (t->seq < 0) return false;
  t->head = head;
  t->q_begin = batch.query_start[t->seq];
  t->q0 = work[1] * kRows;
  t->rows = min(kRows, batch.query_start[t->seq + 1] - t->q_begin - t->q0);
  t->pos0 = batch.num_cached[t->seq] + t->q0;
  t->kv_end = t->pos0 + t->rows;
  t->kvh = head / (args.num_heads / args.num_kv_heads);
  t->table = batch.block_tables + static_cast<std::int64_t>(t->seq) * batch.max_blocks_per_seq;
  return true;
}

// The key tiles a query tile visits, in order: the tiles holding sinks below the recent range,
// then every tile from the one where the tile's first row's window starts up to the diagonal.
// Visit j goes to key tile Tile(j). Without a window: tiles 0 .. ceil(kv_end / keys) - 1.
//
//   W = 6, sink = 2, 4-key tiles, rows at positions 12..15:   tiles  [0 1 2 3][4 5 6 7][8 9 ..]
//   first row's window starts at 7: visits tile 0 (sinks), then tiles 1, 2, 3 (7 .. 15)
struct KeyTileRange {
  int num_sink_tiles;  // visits [0, num_sink_tiles) go to tiles [0, num_sink_tiles)
  int first_recent;    // the rest to tiles first_recent, first_recent + 1, ... end - 1
  int end;
  __device__ __forceinline__ int Count() const { return num_sink_tiles + end - first_recent; }
  __device__ __forceinline__ int Tile(int j) const {
    return j < num_sink_tiles ? j : first_recent + (j - num_sink_tiles);
  }
};

template <bool kWindow>
__device__ __forceinline__ KeyTileRange ContextKeyTiles(const ContextArgs& args,
                                                        const ContextTile& tile, int keys) {
  const int end = (tile.kv_end + keys - 1) / keys;
  if (!kWindow) return {0, 0, end};
  const int first_recent = max(0, tile.pos0 - args.window + 1) / keys;
  return {min((args.sink + keys - 1) / keys, first_recent), first_recent, end};
}

// Which keys of a key tile (first key at position k0) the two rows hr = 0, 1 of a thread see: key
// c of the tile is hidden from row hr when c > causal[hr] (past the row: its position - k0), and
// with a window also when c <= below[hr] (out of its window: its position - window - k0) unless c
// < sink (a sink: sink - k0).
struct TileMask {
  int causal[2];
  int below[2];
  int sink;
};

// The mask of the tile at k0 for rows row_pos[hr] (kWindow: also the window's limits).
template <bool kWindow>
__device__ __forceinline__ TileMask MakeTileMask(const ContextArgs& args, const int (&row_pos)[2],
                                                 int k0) {
  TileMask mask;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    mask.causal[hr] = row_pos[hr] - k0;
    mask.below[hr] = kWindow ? row_pos[hr] - args.window - k0 : 0;
  }
  mask.sink = kWindow ? args.sink - k0 : 0;
  return mask;
}

// Whether some row at positions [first_pos, last_pos] sees a key of the tile [k0, k0 + keys) only
// through the window mask: a key below the last row's window that is not a sink.
__device__ __forceinline__ bool WindowEdgeTile(const ContextArgs& args, int k0, int keys,
                                               int last_pos) {
  return k0 <= last_pos - args.window && k0 + keys > args.sink;
}

// One key tile's online-softmax update for the 16 rows of an m16 fragment. Scores and outputs are
// in the accumulator layout of mma.sync m16n8 (and of each warp's part of wgmma m64nN): thread
// (g = lane / 4, t = lane % 4) holds rows g and g + 8 (hr = 0, 1); s[n][2 hr + e] is key 8 n + 2 t
// + e of the tile and o[n][2 hr + e] output column 8 n + 2 t + e. m: the row's running max (base 2,
// scaled), l: its thread-partial sum of exponentials (the quad sums it at the end). kMask: key c of
// the tile is masked for row hr when c > mask.causal[hr]; kWindowMask: also where the window hides
// it (TileMask).
// On return s holds the unnormalised probabilities and alpha[hr] the factor that rescales the
// row's output to the new max (RescaleOutput), which a caller may apply later: the pipelined wgmma
// kernel computes this tile's scores while the previous tile's P V still accumulates into o.
template <bool kMask, bool kWindowMask, int kKeyFrags>
__device__ __forceinline__ void OnlineSoftmaxScores(float (&s)[kKeyFrags][4], float (&m)[2],
                                                    float (&l)[2], const TileMask& mask,
                                                    float scale_log2, int lane, float (&alpha)[2]) {
  const int t2 = 2 * (lane & 3);
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    if (kMask) {
#pragma unroll
      for (int n = 0; n < kKeyFrags; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = 8 * n + t2 + e;
          bool hidden = c > mask.causal[hr];
          if (kWindowMask) hidden = hidden || (c <= mask.below[hr] && c >= mask.sink);
          if (hidden) s[n][2 * hr + e] = -INFINITY;
        }
    }
    // A tree, not a chain: log2(kKeyFrags) dependent steps on the softmax's critical path.
    float pair_max[kKeyFrags];
#pragma unroll
    for (int n = 0; n < kKeyFrags; ++n) pair_max[n] = fmaxf(s[n][2 * hr], s[n][2 * hr + 1]);
#pragma unroll
    for (int stride = 1; stride < kKeyFrags; stride *= 2)
#pragma unroll
      for (int n = 0; n + stride < kKeyFrags; n += 2 * stride)
        pair_max[n] = fmaxf(pair_max[n], pair_max[n + stride]);
    float tile_max = pair_max[0];
    // The 4 lanes of a quad hold the same rows.
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m[hr], tile_max * scale_log2);
    // A row with nothing unmasked yet keeps m = -inf; subtracting 0 then keeps exps at 0.
    const float m_base = m_new == -INFINITY ? 0.0f : m_new;
    alpha[hr] = Exp2Approx(m[hr] - m_base);
    m[hr] = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < kKeyFrags; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float p = Exp2Approx(fmaf(s[n][2 * hr + e], scale_log2, -m_base));
        s[n][2 * hr + e] = p;
        sum += p;
      }
    l[hr] = l[hr] * alpha[hr] + sum;
  }
}

template <int kOutFrags>
__device__ __forceinline__ void RescaleOutput(float (&o)[kOutFrags][4], const float (&alpha)[2]) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr)
#pragma unroll
    for (int n = 0; n < kOutFrags; ++n) {
      o[n][2 * hr] *= alpha[hr];
      o[n][2 * hr + 1] *= alpha[hr];
    }
}

// OnlineSoftmaxScores with the output rescaled at once.
template <bool kMask, bool kWindowMask, int kKeyFrags, int kOutFrags>
__device__ __forceinline__ void OnlineSoftmaxStep(float (&s)[kKeyFrags][4],
                                                  float (&o)[kOutFrags][4], float (&m)[2],
                                                  float (&l)[2], const TileMask& mask,
                                                  float scale_log2, int lane) {
  float alpha[2];
  OnlineSoftmaxScores<kMask, kWindowMask>(s, m, l, mask, scale_log2, lane, alpha);
  RescaleOutput(o, alpha);
}

// Probabilities of keys 16 kk .. 16 kk + 15 as the A fragment (m16 x k16) of the P V product: the
// accumulator layout of two n8 score fragments is the A layout, so P never goes through shared
// memory.
template <typename T, int kKeyFrags>
__device__ __forceinline__ void PackProbabilities(const float (&s)[kKeyFrags][4], int kk,
                                                  std::uint32_t (&a)[4]) {
  a[0] = PackPair<T>(s[2 * kk][0], s[2 * kk][1]);
  a[1] = PackPair<T>(s[2 * kk][2], s[2 * kk][3]);
  a[2] = PackPair<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = PackPair<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// Writes one m16 fragment's rows (those below `rows`) of the normalised output: row r of the tile
// goes to out_rows + r * row_stride. row0: the fragment's first row within the tile.
template <typename T, int kOutFrags>
__device__ __forceinline__ void StoreOutputRows(const float (&o)[kOutFrags][4], const float (&l)[2],
                                                T* out_tile, std::int64_t row_stride, int row0,
                                                int rows, int lane) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float sum = l[hr];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int r = row0 + (lane >> 2) + 8 * hr;
    if (r >= rows) continue;
    const float inv = 1.0f / sum;
    T* row_out = out_tile + r * row_stride + 2 * (lane & 3);
#pragma unroll
    for (int n = 0; n < kOutFrags; ++n) {
      *reinterpret_cast<std::uint32_t*>(row_out + 8 * n) =
          PackPair<T>(o[n][2 * hr] * inv, o[n][2 * hr + 1] * inv);
    }
  }
}

}  // namespace inflight::kernels::cuda::detail
