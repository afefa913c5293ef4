// The decode attention kernel and its launch (the split reduce: paged_attention_decode_reduce.cuh);
// instantiated per head dim in paged_attention_decode_hd*.cu.
//
// Block (kv head x head tile, sequence, split) attends the keys of split `split` of one sequence
// ([split * partition_tokens, ...) without a window, DecodeWindowSplit's with one) for up to 8
// query heads of one kv head: the keys go through the tensor cores as the M side of S^T = K Q^T (16
// keys per mma, query heads as the 8 columns), and O^T = V^T P^T. Each warp streams its own 16-key
// steps straight from global memory into registers, one step ahead of the one it computes, with its
// own online softmax (base 2); the four warps' states merge in shared memory at the end. No
// shared-memory staging, so the loads in flight are bounded by registers alone.
#pragma once

#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_attention_decode_fragments.cuh"
#include "kernels/cuda/paged_attention_decode_step.cuh"
#include "kernels/cuda/paged_batch.h"

namespace inflight::kernels::cuda::detail {

struct DecodeArgs {
  void* out;
  const void* q;
  std::int64_t q_token_stride;
  const void* k_pool;
  const void* v_pool;
  PagedBatch batch;
  int num_heads;
  int num_kv_heads;
  int group;       // num_heads / num_kv_heads: query heads per kv head
  int head_tiles;  // ceil(group / kDecTileHeads): blocks per kv head
  int tokens_per_block;
  float scale_log2;
  int partition_tokens;  // keys per split
  int max_splits;        // gridDim.z; 1 writes `out` directly
  float* part_o;         // [num_seqs, num_heads, max_splits, D] unnormalised outputs
  float* part_ml;        // [num_seqs, num_heads, max_splits, 2] running max (base 2), sum
  // Keys from each split's start whose K and V rows its block asks L2 for before it waits on the
  // kernel before it (0: none).
  int prefetch_tokens;
  // Launch both kernels as programmatic dependents of the work before them in the stream (sm_90+):
  // each launches while its predecessor's last blocks run, and waits for it to finish before it
  // touches memory.
  bool programmatic;
  // Run DecodeBulkKernel (paged_attention_decode_bulk.cuh) where its sm_90a code runs.
  bool bulk;
  // cpu::AttentionWindow: window > 0 launches the kWindow kernels, whose splits cover only the keys
  // the query sees (DecodeWindowSplit); window 0 the full-attention ones (sink unused).
  int window;
  int sink;
  // An FP8 KV cache (the kernels' KV = Fp8Code): the output's factor v_scale (k_scale is in
  // scale_log2). 1 for fp16 / bf16 pools, where no kernel reads it.
  float v_scale;
  // An FP8 cache's kernel: the blocks each SM must hold at once (2, 3 or 4), which caps its
  // registers; bf16 / fp16 pools run 2.
  int fp8_blocks_per_sm;
};

constexpr int kDecWarps = 4;
constexpr int kDecThreads = 32 * kDecWarps;
constexpr int kDecPartition = 64;  // partition_tokens must be a multiple of this

// What a block of either decode kernel attends: query heads [head0, head0 + tile_heads) of kv head
// kv_head, of sequence s, over the keys of split `split` (from k_begin); and where this thread sits
// in it (warp, and its mma coordinates g = lane / 4, q = lane % 4).
struct DecodeBlock {
  // k_begin: split * partition_tokens; a kWindow kernel moves it to DecodeWindowSplit's.
  int kv_head, head0, tile_heads, s, split, k_begin, warp, lane, g, q;
  const std::int32_t* table;  // the sequence's row of block_tables

  __device__ explicit DecodeBlock(const DecodeArgs& args) {
    kv_head = static_cast<int>(blockIdx.x) / args.head_tiles;
    const int tile = static_cast<int>(blockIdx.x) - kv_head * args.head_tiles;
    head0 = kv_head * args.group + tile * kDecTileHeads;
    tile_heads = min(kDecTileHeads, args.group - tile * kDecTileHeads);
    s = static_cast<int>(blockIdx.y);
    split = static_cast<int>(blockIdx.z);
    k_begin = split * args.partition_tokens;
    warp = static_cast<int>(threadIdx.x) >> 5;
    lane = static_cast<int>(threadIdx.x) & 31;
    g = lane >> 2;
    q = lane & 3;
    table = args.batch.block_tables + static_cast<std::int64_t>(s) * args.batch.max_blocks_per_seq;
  }
};

// With a window, the keys the decode query of a sequence of kv_len keys sees are two ranges
// (cpu::AttentionWindow for position kv_len - 1): the sinks [0, sink_end) and the recent keys
// [recent, kv_len). The first ceil(sink_end / P) splits (P = partition_tokens) cut the sinks, the
// next ones the recent keys, so that no split reads a hidden key and a long sequence reads its
// window only:
//
//   kv_len 1000, window 300, sink 4, P 128:   split 0: [0, 4)   splits 1-3: [700, 828) [828, 956)
//                                             [956, 1000)
//
// Returns the end of split `split` and sets *begin; a split past the last gets begin = end =
// kv_len.
__device__ __forceinline__ int DecodeWindowSplit(const DecodeArgs& args, int split, int kv_len,
                                                 int* begin) {
  const int recent = max(0, kv_len - args.window);
  const int sink_end = min(args.sink, recent);
  const int sink_splits = (sink_end + args.partition_tokens - 1) / args.partition_tokens;
  int first, last;
  if (split < sink_splits) {
    first = split * args.partition_tokens;
    last = min(sink_end, first + args.partition_tokens);
  } else {
    first = recent + (split - sink_splits) * args.partition_tokens;
    last = min(kv_len, first + args.partition_tokens);
  }
  if (first >= last) first = last = kv_len;
  *begin = first;
  return last;
}

// Splits the keys of a sequence of kv_len keys take (DecodeWindowSplit with kWindow).
template <bool kWindow>
__device__ __forceinline__ int DecodeNumSplits(const DecodeArgs& args, int kv_len) {
  const int p = args.partition_tokens;
  if (!kWindow) return (kv_len + p - 1) / p;
  const int recent = max(0, kv_len - args.window);
  const int sink_end = min(args.sink, recent);
  return (sink_end + p - 1) / p + (kv_len - recent + p - 1) / p;
}

// Pool row (block * num_kv_heads + kv head) * tokens_per_block + slot of position `pos`. 32 bits: a
// pool of 2^32 rows would hold at least 512 GB.
__device__ __forceinline__ std::uint32_t DecodePoolRow(const std::int32_t* table, int pos,
                                                       int tokens_per_block, int num_kv_heads,
                                                       int kv_head) {
  const auto block = static_cast<std::uint32_t>(__ldg(table + pos / tokens_per_block));
  return (block * static_cast<std::uint32_t>(num_kv_heads) + static_cast<std::uint32_t>(kv_head)) *
             static_cast<std::uint32_t>(tokens_per_block) +
         static_cast<std::uint32_t>(pos % tokens_per_block);
}

// Asks L2 for the K and V rows of keys [begin, end) of one kv head: one bulk prefetch per pool and
// paged block, spread over the block's threads.
template <typename KV, int D>
__device__ __forceinline__ void PrefetchKeysL2(const std::int32_t* table, int begin, int end,
                                               int tokens_per_block, int num_kv_heads, int kv_head,
                                               const KV* k_pool, const KV* v_pool) {
  const int first = begin / tokens_per_block;
  const int pieces = 2 * ((end - 1) / tokens_per_block - first + 1);
  for (int i = static_cast<int>(threadIdx.x); i < pieces; i += static_cast<int>(blockDim.x)) {
    const int b = first + i / 2;
    const int lo = max(begin, b * tokens_per_block);
    const int hi = min(end, (b + 1) * tokens_per_block);
    const std::uint32_t row = DecodePoolRow(table, lo, tokens_per_block, num_kv_heads, kv_head);
    PrefetchL2(((i & 1) != 0 ? v_pool : k_pool) + static_cast<std::size_t>(row) * D,
               static_cast<std::uint32_t>((hi - lo) * D * static_cast<int>(sizeof(KV))));
  }
}

// Where DecodeLoadStep reads: the pools in global memory, streamed past L1, or a block's copy of
// its rows in shared memory.
struct DecodeGlobalRows {
  __device__ static uint4 Load16(const void* p) { return LoadStream16(p); }
  __device__ static uint2 Load8(const void* p) { return LoadStream8(p); }
  __device__ static std::uint32_t Load4(const void* p) { return LoadStream4(p); }
};
struct DecodeSharedRows {
  __device__ static uint4 Load16(const void* p) { return *static_cast<const uint4*>(p); }
  __device__ static uint2 Load8(const void* p) { return *static_cast<const uint2*>(p); }
  __device__ static std::uint32_t Load4(const void* p) {
    return *static_cast<const std::uint32_t*>(p);
  }
};

// Issues the loads of one step: row_of(i) is the row (of k_rows and v_rows) of the step's key i.
template <typename T, int D, typename Src, typename RowOf>
__device__ __forceinline__ void DecodeLoadStep(DecodeStepRegs<D>& r, RowOf row_of, const T* k_rows,
                                               const T* v_rows, int g, int q) {
  using L = DecodeLayout<D>;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const T* k = k_rows + static_cast<std::size_t>(row_of(g + 8 * i)) * D;
#pragma unroll
    for (int p = 0; p < L::kKPieces; ++p) r.k[i][p] = Src::Load16(k + 32 * p + 8 * q);
    if constexpr (L::kKTail) r.k_tail[i] = Src::Load8(k + 32 * L::kKPieces + 4 * q);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const T* v = v_rows + static_cast<std::size_t>(row_of(2 * q + (i & 1) + 8 * (i >> 1))) * D;
#pragma unroll
    for (int h = 0; h < L::kVPieces; ++h) r.v[i][h] = Src::Load16(v + 64 * h + 8 * g);
    if constexpr (L::kVTailWords == 1) {
      r.v_tail[i][0] = Src::Load4(v + 64 * L::kVPieces + 2 * g);
    } else if constexpr (L::kVTailWords == 2) {
      const uint2 w = Src::Load8(v + 64 * L::kVPieces + 4 * g);
      r.v_tail[i][0] = w.x;
      r.v_tail[i][1] = w.y;
    }
  }
}

// One step from the pools. rows: lane i holds the pool row of the step's key i % 16.
template <typename T, int D>
__device__ __forceinline__ void DecodeFetchStep(DecodeStepRegs<D>& r, std::uint32_t rows,
                                                const T* k_pool, const T* v_pool, int g, int q) {
  DecodeLoadStep<T, D, DecodeGlobalRows>(
      r, [&](int key) { return __shfl_sync(0xffffffffu, rows, key); }, k_pool, v_pool, g, q);
}

// Q^T fragments of a block's query heads: column g is query head head0 + g (zero past the
// tile's heads).
template <typename T, int D>
__device__ __forceinline__ void DecodeLoadQuery(const DecodeArgs& args, const DecodeBlock& b,
                                                int q_row, uint4 (&qf)[DecodeLayout<D>::kKPieces],
                                                uint2& qf_tail) {
  using L = DecodeLayout<D>;
  qf_tail = make_uint2(0u, 0u);
#pragma unroll
  for (int p = 0; p < L::kKPieces; ++p) qf[p] = make_uint4(0u, 0u, 0u, 0u);
  if (b.g >= b.tile_heads) return;
  const T* qp = static_cast<const T*>(args.q) +
                static_cast<std::int64_t>(q_row) * args.q_token_stride +
                static_cast<std::int64_t>(b.head0 + b.g) * D;
#pragma unroll
  for (int p = 0; p < L::kKPieces; ++p)
    qf[p] = __ldg(reinterpret_cast<const uint4*>(qp + 32 * p + 8 * b.q));
  if constexpr (L::kKTail)
    qf_tail = __ldg(reinterpret_cast<const uint2*>(qp + 32 * L::kKPieces + 4 * b.q));
}

// Where the merge keeps the warps' unnormalised outputs in shared memory:
// [kDecWarps][kDecTileHeads] rows of kRow floats, one float of padding after every 32 dims and an
// odd row length. A warp's store of one fragment register (heads 2q or 2q + 1, dims Dim(t, g)) then
// hits 32 different banks: 8g + g / 4 spreads the eight g over {0, 8, 16, 24, 1, 9, 17, 25} and an
// odd row length moves the four q by 0, 2, 4, 6 (mod 8). Unpadded, [warp][head][D] put them 13.6
// ways on one bank on average (Nsight Compute, FP8 cache, 1,024 x 192 keys), at the end of every
// block.
template <int D>
struct DecodeMergeLayout {
  static constexpr int kRow = (D + D / 32) | 1;
  static constexpr int kFloats = kDecWarps * kDecTileHeads * kRow;
  __device__ static constexpr int At(int warp, int head, int d) {
    return (warp * kDecTileHeads + head) * kRow + d + d / 32;
  }
};

// Merges the block's four warp states through shared memory (s_o: DecodeMergeLayout; s_m, s_l:
// [kDecWarps][kDecTileHeads]) and stores the result: the output rows when the sequence runs
// unsplit, else this split's unnormalised output, running max and sum for the reduce.
template <typename T, int D, bool kScaleV = false>
__device__ __forceinline__ void DecodeMergeWarpsAndStore(const DecodeArgs& args,
                                                         const DecodeBlock& b,
                                                         DecodeWarpState<D>& st, float* s_o,
                                                         float (*s_m)[kDecTileHeads],
                                                         float (*s_l)[kDecTileHeads], int q_row) {
  using M = DecodeMergeLayout<D>;
  using L = DecodeLayout<D>;
  const int s = b.s, split = b.split, head0 = b.head0, tile_heads = b.tile_heads;
  const int warp = b.warp, g = b.g, q = b.q;
  // Merge the warps: lanes of one q hold parts of the same heads' sums.
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int offset = 4; offset < 32; offset <<= 1)
      st.l[j] += __shfl_xor_sync(0xffffffffu, st.l[j], offset);
  }
  const std::ptrdiff_t head_pair = 2 * static_cast<std::ptrdiff_t>(q);
  if (g == 0) {
    s_m[warp][head_pair] = st.m[0];
    s_m[warp][head_pair + 1] = st.m[1];
    s_l[warp][head_pair] = st.l[0];
    s_l[warp][head_pair + 1] = st.l[1];
  }
  // Heads past the tile's (a group of 4 fills half the mma's 8 columns) are never read.
  if (2 * q < tile_heads) {
#pragma unroll
    for (int t = 0; t < L::kMTiles; ++t) {
      s_o[M::At(warp, 2 * q, L::Dim(t, g))] = st.o[t][0];
      s_o[M::At(warp, 2 * q + 1, L::Dim(t, g))] = st.o[t][1];
      s_o[M::At(warp, 2 * q, L::Dim(t, g + 8))] = st.o[t][2];
      s_o[M::At(warp, 2 * q + 1, L::Dim(t, g + 8))] = st.o[t][3];
    }
  }
  __syncthreads();

  for (int idx = static_cast<int>(threadIdx.x); idx < tile_heads * D; idx += kDecThreads) {
    const int h = idx / D, d = idx - h * D;
    float m_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecWarps; ++w) m_max = fmaxf(m_max, s_m[w][h]);
    float l_sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecWarps; ++w) {
      const float weight = exp2f(s_m[w][h] - m_max);  // 0 for a warp that had no keys
      l_sum += s_l[w][h] * weight;
      acc += s_o[M::At(w, h, d)] * weight;
    }
    if constexpr (kScaleV) acc *= args.v_scale;  // an FP8 cache's V = code * v_scale
    const std::int64_t head = head0 + h;
    if (args.max_splits == 1) {
      static_cast<T*>(
          args.out)[(static_cast<std::int64_t>(q_row) * args.num_heads + head) * D + d] =
          FromFloat<T>(acc / l_sum);
    } else {
      const std::int64_t slot =
          (static_cast<std::int64_t>(s) * args.num_heads + head) * args.max_splits + split;
      args.part_o[slot * D + d] = acc;
      if (d == 0) {
        args.part_ml[slot * 2] = m_max;
        args.part_ml[slot * 2 + 1] = l_sum;
      }
    }
  }
}

// How the register-stream kernel loads and computes a warp step from pools of KV: T pools straight
// into the mma fragments, FP8 pools (paged_attention_decode_fp8.cuh) as half the bytes, widened to
// fp16 as the step's products ask for them.
template <typename T, typename KV, int D>
struct DecodeSteps {
  using Regs = DecodeStepRegs<D>;
  // The query fragments as the products take them, and the scores' factor that goes with them.
  __device__ static __forceinline__ float PrepareQuery(uint4* /*qf*/, uint2& /*qf_tail*/,
                                                       float scale_log2) {
    return scale_log2;
  }
  __device__ static __forceinline__ void Fetch(Regs& r, std::uint32_t rows, const T* k_pool,
                                               const T* v_pool, int g, int q) {
    DecodeFetchStep<T, D>(r, rows, k_pool, v_pool, g, q);
  }
  // A step's loads from rows in shared memory (the bulk kernel's stages).
  template <typename Src, typename RowOf>
  __device__ static __forceinline__ void Load(Regs& r, RowOf row_of, const T* k_rows,
                                              const T* v_rows, int g, int q) {
    DecodeLoadStep<T, D, Src>(r, row_of, k_rows, v_rows, g, q);
  }
  __device__ static __forceinline__ void Compute(DecodeWarpState<D>& st, const Regs& r,
                                                 const uint4* qf, uint2 qf_tail, float scale_log2,
                                                 int base, int k_end, int g) {
    DecodeComputeStep<T, D>(st, r, qf, qf_tail, scale_log2, base, k_end, g);
  }
};

}  // namespace inflight::kernels::cuda::detail

#include "kernels/cuda/paged_attention_decode_fp8.cuh"

namespace inflight::kernels::cuda::detail {

// Grid: (num_kv_heads * head_tiles, num_seqs, max_splits), block: kDecThreads. kWindow: the split's
// keys come from DecodeWindowSplit, which needs the sequence's length first.
template <typename T, int D, bool kWindow, typename KV = T, int kMinBlocks = 2>
__global__ void __launch_bounds__(kDecThreads, kMinBlocks) DecodeAttentionKernel(DecodeArgs args) {
  using L = DecodeLayout<D>;
  using Steps = DecodeSteps<T, KV, D>;
  __shared__ float s_o[DecodeMergeLayout<D>::kFloats];
  __shared__ float s_m[kDecWarps][kDecTileHeads];
  __shared__ float s_l[kDecWarps][kDecTileHeads];

  const PagedBatch& batch = args.batch;
  DecodeBlock b(args);
  int k_end = 0;  // set here with a window (its split is known), else once the length is
  if constexpr (kWindow) {
    k_end = DecodeWindowSplit(args, b.split, batch.num_cached[b.s] + 1, &b.k_begin);
  }
  const auto step_base = [&](int j) { return b.k_begin + (b.warp + j * kDecWarps) * kDecStepKeys; };
  // The pool rows of this warp's first two steps go out together with the sequence's length, for
  // the keys below max_kv_len (table entries that exist); keys past the sequence's end swap their
  // row for one in range below, once the length is known. (With a window the split is exact.)
  const int speculative_end =
      kWindow ? k_end : min(batch.max_kv_len, b.k_begin + args.partition_tokens);
  const auto speculative_rows = [&](int j) {
    return DecodePoolRow(b.table, min(step_base(j) + (b.lane & 15), speculative_end - 1),
                         args.tokens_per_block, args.num_kv_heads, b.kv_head);
  };
  // Up to the wait, the block reads only what no kernel of the step writes (the block table, the
  // lengths: see PagedAttentionDecode) and asks L2 for cache rows (L2 stays coherent with the
  // kernel before, which writes each sequence's newest row), so this overlaps that kernel's tail.
  std::uint32_t rows0 = speculative_rows(0), rows1 = speculative_rows(1);
  const int kv_len = batch.num_cached[b.s] + 1;
  const int keys_end = kWindow ? k_end : kv_len;  // no key of the split at or past it
  if (args.prefetch_tokens > 0 && b.k_begin < keys_end) {
    PrefetchKeysL2<KV, D>(b.table, b.k_begin, min(keys_end, b.k_begin + args.prefetch_tokens),
                          args.tokens_per_block, args.num_kv_heads, b.kv_head,
                          static_cast<const KV*>(args.k_pool), static_cast<const KV*>(args.v_pool));
  }
  GridDependencyWait();
  GridDependencyLaunchDependents();
  // A split past this sequence's end does nothing (graphs size for the longest).
  if (b.k_begin >= keys_end) return;
  if constexpr (!kWindow) k_end = min(kv_len, b.k_begin + args.partition_tokens);
  const int q_row = batch.query_start[b.s];
  const KV* k_pool = static_cast<const KV*>(args.k_pool);
  const KV* v_pool = static_cast<const KV*>(args.v_pool);

  uint4 qf[L::kKPieces];
  uint2 qf_tail;
  DecodeLoadQuery<T, D>(args, b, q_row, qf, qf_tail);
  const float scale_log2 = Steps::PrepareQuery(qf, qf_tail, args.scale_log2);
  DecodeWarpState<D> st;
  st.Reset();

  // Warp w takes steps w, w + kDecWarps, ...; a lane computes the pool row of key lane % 16 of a
  // step one step before its loads go out, so the block-table read is off the critical path. Keys
  // past the split's end read a row in range (finite) and are masked: the split's last key's, or
  // for the first two steps the step's first key's (lane 0).
  const int num_steps = (k_end - b.k_begin + kDecStepKeys - 1) / kDecStepKeys;
  const int my_steps = b.warp < num_steps ? (num_steps - b.warp + kDecWarps - 1) / kDecWarps : 0;
  const auto rows_of = [&](int j) {
    return DecodePoolRow(b.table, min(step_base(j) + (b.lane & 15), k_end - 1),
                         args.tokens_per_block, args.num_kv_heads, b.kv_head);
  };
  const auto in_range = [&](int j) { return step_base(j) + (b.lane & 15) < k_end; };
  // NOTE: the shuffles stay outside the selects, so that every lane runs them.
  const std::uint32_t first_key_row0 = __shfl_sync(0xffffffffu, rows0, 0);
  const std::uint32_t first_key_row1 = __shfl_sync(0xffffffffu, rows1, 0);
  rows0 = in_range(0) ? rows0 : first_key_row0;
  rows1 = in_range(1) ? rows1 : first_key_row1;
  typename Steps::Regs ra, rb;
  std::uint32_t rows = rows1;
  if (my_steps > 0) Steps::Fetch(ra, rows0, k_pool, v_pool, b.g, b.q);
  // Two register sets in turn (no copies between them): while one step computes, the next loads.
  for (int j = 0; j < my_steps; j += 2) {
    if (j + 1 < my_steps) {
      Steps::Fetch(rb, rows, k_pool, v_pool, b.g, b.q);
      if (j + 2 < my_steps) rows = rows_of(j + 2);
    }
    Steps::Compute(st, ra, qf, qf_tail, scale_log2, step_base(j), k_end, b.g);
    if (j + 1 >= my_steps) break;
    if (j + 2 < my_steps) {
      Steps::Fetch(ra, rows, k_pool, v_pool, b.g, b.q);
      if (j + 3 < my_steps) rows = rows_of(j + 3);
    }
    Steps::Compute(st, rb, qf, qf_tail, scale_log2, step_base(j + 1), k_end, b.g);
  }

  DecodeMergeWarpsAndStore<T, D, !std::is_same_v<KV, T>>(args, b, st, s_o, s_m, s_l, q_row);
}

}  // namespace inflight::kernels::cuda::detail

#include "kernels/cuda/paged_attention_decode_bulk.cuh"
#include "kernels/cuda/paged_attention_decode_reduce.cuh"

namespace inflight::kernels::cuda::detail {

template <typename T, int D, bool kWindow, typename KV = T>
cudaError_t LaunchDecodeAttentionFor(const DecodeArgs& args, cudaStream_t stream) {
  cudaLaunchAttribute programmatic = {};
  programmatic.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  programmatic.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim =
      dim3(static_cast<unsigned>(args.num_kv_heads * args.head_tiles),
           static_cast<unsigned>(args.batch.num_seqs), static_cast<unsigned>(args.max_splits));
  config.blockDim = dim3(kDecThreads);
  config.stream = stream;
  config.attrs = args.programmatic ? &programmatic : nullptr;
  config.numAttrs = args.programmatic ? 1 : 0;
  cudaError_t err = cudaSuccess;
  // NOTE: decided once per process, for the device of the first call (as context attention's).
  static const bool bulk_runs = Sm90aCodeRuns(DecodeBulkKernel<T, D, kWindow, KV>);
  if (args.bulk && bulk_runs) {
    // NOTE: set at every launch: the attribute belongs to the current device's context.
    config.dynamicSmemBytes = DecodeBulkTiling<KV, D>::kSmemBytes;
    err = cudaFuncSetAttribute(DecodeBulkKernel<T, D, kWindow, KV>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               DecodeBulkTiling<KV, D>::kSmemBytes);
    if (err == cudaSuccess)
      err = cudaLaunchKernelEx(&config, DecodeBulkKernel<T, D, kWindow, KV>, args);
    config.dynamicSmemBytes = 0;
  } else if constexpr (!std::is_same_v<KV, T>) {
    switch (args.fp8_blocks_per_sm) {
      case 3:
        err = cudaLaunchKernelEx(&config, DecodeAttentionKernel<T, D, kWindow, KV, 3>, args);
        break;
      case 4:
        err = cudaLaunchKernelEx(&config, DecodeAttentionKernel<T, D, kWindow, KV, 4>, args);
        break;
      default:
        err = cudaLaunchKernelEx(&config, DecodeAttentionKernel<T, D, kWindow, KV, 2>, args);
    }
  } else {
    err = cudaLaunchKernelEx(&config, DecodeAttentionKernel<T, D, kWindow>, args);
  }
  if (err != cudaSuccess || args.max_splits == 1) return err;
  config.gridDim =
      dim3(static_cast<unsigned>(args.num_heads), static_cast<unsigned>(args.batch.num_seqs));
  return cudaLaunchKernelEx(&config, DecodeReduceKernel<T, D, kWindow>, args);
}

// A window (args.window > 0) takes the kWindow instantiations; full attention keeps its own, with
// no window arithmetic in them.
template <typename T, int D, typename KV = T>
cudaError_t LaunchDecodeAttention(const DecodeArgs& args, cudaStream_t stream) {
  if (args.window > 0) return LaunchDecodeAttentionFor<T, D, true, KV>(args, stream);
  return LaunchDecodeAttentionFor<T, D, false, KV>(args, stream);
}

cudaError_t LaunchDecodeAttentionHd64(const DecodeArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchDecodeAttentionHd80(const DecodeArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchDecodeAttentionHd96(const DecodeArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchDecodeAttentionHd128(const DecodeArgs& args, DType dtype, cudaStream_t stream);
// FP8 pools (paged_attention_decode_fp8_hd*.cu): head dims 64 and 128.
cudaError_t LaunchDecodeAttentionFp8Hd64(const DecodeArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchDecodeAttentionFp8Hd128(const DecodeArgs& args, DType dtype, cudaStream_t stream);

}  // namespace inflight::kernels::cuda::detail
