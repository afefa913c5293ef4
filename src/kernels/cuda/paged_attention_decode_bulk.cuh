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
      kDecWarps * kDecTileHeads * (D + 2) * static_cast<int>(sizeof(float));
  static_assert(kMergeBytes <= kSmemBytes, "the merge fits in the stages");
  static_assert(kDecPartition % kChunkKeys == 0, "splits are whole stages");
};

// Thread 0: the K and V rows of keys [c0, c1) of one kv head into the stage at `dst`, one bulk
// copy per paged block and pool, completing on `bar`.
template <typename KV, int D>
__device__ __forceinline__ void DecodeCopyChunk(const DecodeArgs& args, const std::int32_t* table,
                                                int kv_head, int c0, int c1, std::uint32_t dst,
                                                std::uint32_t bar) {
  using Tiling = DecodeBulkTiling<KV, D>;
  constexpr auto kRowBytes = static_cast<std::uint32_t>(Tiling::kRowBytes);
  MbarrierArriveExpectTx(bar, 2 * static_cast<std::uint32_t>(c1 - c0) * kRowBytes);
  for (int pos = c0; pos < c1;) {
    const int next = min(c1, (pos / args.tokens_per_block + 1) * args.tokens_per_block);
    const std::size_t row =
        DecodePoolRow(table, pos, args.tokens_per_block, args.num_kv_heads, kv_head);
    const auto bytes = static_cast<std::uint32_t>(next - pos) * kRowBytes;
    const std::uint32_t at = dst + static_cast<std::uint32_t>(pos - c0) * kRowBytes;
    BulkCopyToShared(at, static_cast<const KV*>(args.k_pool) + row * D, bytes, bar);
    BulkCopyToShared(at + Tiling::kChunkKeys * kRowBytes,
                     static_cast<const KV*>(args.v_pool) + row * D, bytes, bar);
    pos = next;
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
  const auto copy_chunk = [&](int c) {
    const int c0 = b.k_begin + c * kChunk;
    DecodeCopyChunk<KV, D>(
        args, b.table, b.kv_head, c0, min(k_end, c0 + kChunk),
        smem_base + static_cast<std::uint32_t>((c % kStages) * Tiling::kStageBytes),
        bar0 + static_cast<std::uint32_t>((c % kStages) * 8));
  };
  const int first_chunks = min(kStages, chunks);
  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) MbarrierInit(bar0 + static_cast<std::uint32_t>(st * 8), 1);
    FenceMbarrierInit();
    for (int c = 0; c < first_chunks; ++c) {
      if (c != newest_chunk) copy_chunk(c);
    }
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
  if (threadIdx.x == 0 && newest_chunk < first_chunks) copy_chunk(newest_chunk);

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
    __syncthreads();  // every warp is done with the stage: it may be refilled
    if (threadIdx.x == 0 && c + kStages < chunks) copy_chunk(c + kStages);
  }

  auto* s_o = reinterpret_cast<float(*)[kDecTileHeads][D]>(smem);
  constexpr std::size_t kOBytes = sizeof(float) * kDecWarps * kDecTileHeads * D;
  auto* s_m = reinterpret_cast<float(*)[kDecTileHeads]>(smem + kOBytes);
  auto* s_l = s_m + kDecWarps;
  DecodeMergeWarpsAndStore<T, D, !std::is_same_v<KV, T>>(args, b, st, s_o, s_m, s_l, q_row);
}

}  // namespace inflight::kernels::cuda::detail
