// The decode attention kernel of small grids on Hopper (sm_90a): the same blocks, products and
// outputs as DecodeAttentionKernel, but each block's K and V rows reach shared memory by TMA bulk
// copies, one per paged block and pool, through a ring of 64-key stages, instead of streaming into
// registers one step ahead. The copies of the first stages go out before the block waits on the
// kernel before it, so a call's reads start while that kernel (or the call before) still runs. On
// an H100, bulk copies read 16.8 MB of 1 x 4096 paged K/V at the rate of a bare contiguous read
// (7.4 against 6.9 us), the register stream at 8.0 us. An FP8 cache (KV = Fp8Code) takes the same
// path with stages of half the bytes, more of them, and its steps' loads and products
// (DecodeSteps<T, Fp8Code, D>): there every block of a large batch keeps its whole split in flight
// at once, where the register stream keeps one step a warp.
#pragma once

#include "kernels/cuda/hopper_ptx.cuh"

namespace inflight::kernels::cuda::detail {

// An FP8 cache's kernel has three stages (48 KB at D = 128) and holds 4 blocks an SM: on an H200
// that took 10-24% off batches of 64 to 1024 sequences against four stages and 3 blocks (1024 x 192
// keys 167 -> 148 us, 64 x 2048 91 -> 69), cost 1 us at 32 x 512 and tied at 8 x 2048 and 1 x 1024.
template <typename KV, int D>
struct DecodeBulkTiling {
  static constexpr bool kFp8 = sizeof(KV) == 1;
  static constexpr int kChunkKeys = kDecWarps * kDecStepKeys;  // a stage: one step for each warp
  static constexpr int kStages = kFp8 ? 3 : 2;
  static constexpr int kBlocksPerSm = kFp8 ? 4 : 1;  // the launch bounds (1: registers free)
  static constexpr int kRowBytes = D * static_cast<int>(sizeof(KV));
  static constexpr int kStageBytes = 2 * kChunkKeys * kRowBytes;  // K rows, then V rows
  static constexpr int kSmemBytes = kStages * kStageBytes;
  // The warps' merge reuses the stages once the last one is read.
  static constexpr int kMergeBytes =
      (DecodeMergeLayout<D>::kFloats + 2 * kDecWarps * kDecTileHeads) *
      static_cast<int>(sizeof(float));
  static_assert(kMergeBytes <= kSmemBytes, "the merge fits in the stages");
  static_assert(kDecPartition % kChunkKeys == 0, "splits are whole stages");
};

// Warp 0: the K and V rows of chunks [c_lo, c_hi) but `skip` (keys [k_begin + c * kChunkKeys,
// +kChunkKeys) clipped at k_end) into their stages, one bulk copy per pool and paged block of a
// chunk, completing on the stage's barrier. The lanes take the (chunk, paged block) pieces in
// parallel, so their block table reads overlap: from one thread, each copy waited on its own table
// read (asm volatile orders them), three reads in a row before a 192-key block's last chunk was
// asked for.
template <typename KV, int D>
__device__ __forceinline__ void DecodeCopyChunks(const DecodeArgs& args, const DecodeBlock& b,
                                                 int k_end, int c_lo, int c_hi, int skip,
                                                 std::uint32_t smem_base, std::uint32_t bar0) {
  using Tiling = DecodeBulkTiling<KV, D>;
  constexpr int kChunk = Tiling::kChunkKeys;
  constexpr auto kRowBytes = static_cast<std::uint32_t>(Tiling::kRowBytes);
  const int tpb = args.tokens_per_block;
  const int per_chunk = (kChunk + tpb - 1) / tpb + 1;  // paged blocks a chunk can touch
  const auto stage_of = [](int c) { return static_cast<std::uint32_t>(c % Tiling::kStages); };
  if (b.lane == 0) {
    for (int c = c_lo; c < c_hi; ++c) {
      const int c0 = b.k_begin + c * kChunk;
      if (c != skip) {
        MbarrierArriveExpectTx(
            bar0 + 8 * stage_of(c),
            2 * static_cast<std::uint32_t>(min(k_end, c0 + kChunk) - c0) * kRowBytes);
      }
    }
  }
  for (int j = b.lane; j < (c_hi - c_lo) * per_chunk; j += 32) {
    const int c = c_lo + j / per_chunk;
    const int c0 = b.k_begin + c * kChunk;
    const int block = c0 / tpb + j % per_chunk;
    const int lo = max(c0, block * tpb);
    const int hi = min(min(k_end, c0 + kChunk), (block + 1) * tpb);
    if (c == skip || lo >= hi) continue;
    const std::size_t row = DecodePoolRow(b.table, lo, tpb, args.num_kv_heads, b.kv_head);
    const auto bytes = static_cast<std::uint32_t>(hi - lo) * kRowBytes;
    const std::uint32_t at = smem_base + stage_of(c) * Tiling::kStageBytes +
                             static_cast<std::uint32_t>(lo - c0) * kRowBytes;
    const std::uint32_t bar = bar0 + 8 * stage_of(c);
    BulkCopyToShared(at, static_cast<const KV*>(args.k_pool) + row * D, bytes, bar);
    BulkCopyToShared(at + kChunk * kRowBytes, static_cast<const KV*>(args.v_pool) + row * D, bytes,
                     bar);
  }
}

// Grid, block and kWindow as DecodeAttentionKernel; dynamic shared memory
// DecodeBulkTiling::kSmemBytes.
template <typename T, int D, bool kWindow, typename KV = T>
__global__ void __launch_bounds__(kDecThreads, DecodeBulkTiling<KV, D>::kBlocksPerSm)
    DecodeBulkKernel(DecodeArgs args) {
  using Tiling = DecodeBulkTiling<KV, D>;
  using Steps = DecodeSteps<T, KV, D>;
  constexpr int kChunk = Tiling::kChunkKeys, kStages = Tiling::kStages;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) std::uint64_t full[kStages];

  const PagedBatch& batch = args.batch;
  DecodeBlock b(args);
  // Up to the wait the block reads only the lengths and tables and copies cached rows: the kernel
  // before may write q and each sequence's newest row (see PagedAttentionDecode), not those.
  const int kv_len = batch.num_cached[b.s] + 1;
  int k_end;
  if constexpr (kWindow) {
    k_end = DecodeWindowSplit(args, b.split, kv_len, &b.k_begin);
    if (b.k_begin >= k_end) return;
  } else {
    // A split past this sequence's end does nothing (graphs size for the longest).
    if (b.k_begin >= kv_len) return;
    k_end = min(kv_len, b.k_begin + args.partition_tokens);
  }
  const int chunks = (k_end - b.k_begin + kChunk - 1) / kChunk;
  // Copied after the wait (none in a split of sinks, which ends before the newest row).
  const int newest_chunk = kWindow && k_end < kv_len ? chunks : (kv_len - 1 - b.k_begin) / kChunk;
  const auto smem_base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  const auto bar0 = static_cast<std::uint32_t>(__cvta_generic_to_shared(full));
  const int first_chunks = min(kStages, chunks);
  // Warp 0 issues the copies (DecodeCopyChunks); thread 0 sets up the barriers first.
  const auto copy_chunks = [&](int c_lo, int c_hi, int skip) {
    DecodeCopyChunks<KV, D>(args, b, k_end, c_lo, c_hi, skip, smem_base, bar0);
  };
  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) MbarrierInit(bar0 + static_cast<std::uint32_t>(st * 8), 1);
    FenceMbarrierInit();
  }
  if (b.warp == 0) {
    __syncwarp();
    copy_chunks(0, first_chunks, newest_chunk);
  }
  const int ring_end = b.k_begin + kStages * kChunk;
  const int keys_end = kWindow ? k_end : kv_len;
  if (args.prefetch_tokens > kStages * kChunk && ring_end < keys_end) {
    PrefetchKeysL2<KV, D>(b.table, ring_end, min(keys_end, b.k_begin + args.prefetch_tokens),
                          args.tokens_per_block, args.num_kv_heads, b.kv_head,
                          static_cast<const KV*>(args.k_pool), static_cast<const KV*>(args.v_pool));
  }
  __syncthreads();  // the barriers are initialised before any thread waits on them
  GridDependencyWait();
  GridDependencyLaunchDependents();
  if (b.warp == 0 && newest_chunk < first_chunks) copy_chunks(newest_chunk, newest_chunk + 1, -1);

  const int q_row = batch.query_start[b.s];
  uint4 qf[DecodeLayout<D>::kKPieces];
  uint2 qf_tail;
  DecodeLoadQuery<T, D>(args, b, q_row, qf, qf_tail);
  const float scale_log2 = Steps::PrepareQuery(qf, qf_tail, args.scale_log2);
  DecodeWarpState<D> st;
  st.Reset();

  // Warp w computes step w of each stage. Keys past the split's end read the stage's last row
  // (finite: stale rows of shared memory could hold anything) and are masked.
  for (int c = 0; c < chunks; ++c) {
    const int stage = c % kStages;
    MbarrierWait(bar0 + static_cast<std::uint32_t>(stage * 8), (c / kStages) & 1);
    const int c0 = b.k_begin + c * kChunk;
    const int last_row = min(k_end, c0 + kChunk) - 1 - c0;
    const int step_row = b.warp * kDecStepKeys;
    if (step_row <= last_row) {
      const KV* k_rows = reinterpret_cast<const KV*>(smem + stage * Tiling::kStageBytes);
      typename Steps::Regs r;
      Steps::template Load<DecodeSharedRows>(
          r, [&](int key) { return min(step_row + key, last_row); }, k_rows, k_rows + kChunk * D,
          b.g, b.q);
      Steps::Compute(st, r, qf, qf_tail, scale_log2, c0 + step_row, k_end, b.g);
    }
    // A stage is refilled once every warp is done with it; the last kStages chunks are not, so
    // their warps go on to the next stage without waiting for each other (a 192-key block: no
    // barrier between its three chunks).
    if (c + kStages < chunks) {
      __syncthreads();
      if (b.warp == 0) copy_chunks(c + kStages, c + kStages + 1, -1);
    }
  }
  __syncthreads();  // the merge below writes over the stages

  auto* s_o = reinterpret_cast<float*>(smem);
  constexpr std::size_t kOBytes = sizeof(float) * DecodeMergeLayout<D>::kFloats;
  auto* s_m = reinterpret_cast<float(*)[kDecTileHeads]>(smem + kOBytes);
  auto* s_l = s_m + kDecWarps;
  DecodeMergeWarpsAndStore<T, D, !std::is_same_v<KV, T>>(args, b, st, s_o, s_m, s_l, q_row);
}

}  // namespace inflight::kernels::cuda::detail
