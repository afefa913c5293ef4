// The wgmma context attention kernel's loader for an FP8 KV cache (paged_batch.h KvFp8Scales): the
// computing warpgroups multiply T tiles as over fp16 / bf16 pools, and the loading warpgroup fills
// those tiles from the codes, widened exactly (fp8_kv.cuh DecodeFp8x8). The codes reach shared
// memory by cp.async into staging slots, two tiles ahead of the widening, so that a tile's loads
// are in flight while the tiles before it are widened and no register holds them meanwhile (the
// mma.sync kernel's register double buffer does not fit the loaders' 40 registers). With one tile
// ahead the loaders kept the tensor cores waiting: 0.74x the bf16 cache's time at 4 x 2048 tokens
// on an H200.
#pragma once

#include <cstdint>

#include "kernels/cuda/fp8_kv.cuh"
#include "kernels/cuda/hopper_ptx.cuh"
#include "kernels/cuda/paged_attention_context_ptx.cuh"
#include "kernels/cuda/paged_attention_context_wgmma_tiling.cuh"

namespace inflight::kernels::cuda::detail {

// Jobs in the order the computing warpgroups use the tiles: per step j, K_j (j < tiles) then
// V_{j-1} (j > 0). Job i's codes go to staging slot i % 3; each thread copies and later widens
// the same 16-byte pieces (16 codes: units 2c and 2c + 1 of a T row), so no barrier orders a
// slot's copies against its reads but the thread's own cp.async groups. raw: the staging slots'
// shared-memory address (Cfg::kRawAt).
template <typename T, int D, typename Cfg, bool kWindow>
__device__ __forceinline__ void LoadContextTilesFp8(const ContextArgs& args,
                                                    const ContextTile& tile, std::uint32_t sQ,
                                                    std::uint32_t bars, std::int64_t* sKeyOffset,
                                                    std::uint32_t raw) {
  constexpr int kPieces = D / 16;  // 16-byte pieces of codes per key row
  static_assert(Cfg::kLoaderThreads % kPieces == 0, "whole rows per pass");
  constexpr int kRowStep = Cfg::kLoaderThreads / kPieces;
  static_assert(kRowStep % 8 == 0, "one swizzle term per thread");
  static_assert(Cfg::kKeys % kRowStep == 0, "whole passes");
  static_assert(Cfg::kKeys <= Cfg::kLoaderThreads, "one key offset per loader thread");
  constexpr int kCopies = Cfg::kKeys / kRowStep;  // pieces of a tile per thread
  constexpr int kSlots = Cfg::kRawSlots;
  const int tid = static_cast<int>(threadIdx.x);
  const int piece = tid % kPieces, row0 = tid / kPieces;
  const std::uint32_t sK = sQ + Cfg::kQBytes;
  const std::uint32_t sV = sK + 2 * Cfg::kTileBytes;
  const KeyTileRange key_tiles = ContextKeyTiles<kWindow>(args, tile, Cfg::kKeys);
  const int num_key_tiles = key_tiles.Count();
  const auto bar = [bars](int index) { return BarrierAt(bars, index); };
  const int first_seen = kWindow ? max(0, tile.pos0 - args.window + 1) : 0;

  LoadWgmmaQueryTile<T, D, Cfg>(args, tile, sQ);
  CpAsyncMbarrierArrive(bar(Cfg::kQFull));
  // Key offsets of visits in a ring of four: step j stages visits j and j + 1 and writes visit
  // j + 2's; the barrier at the top of each step orders the writes against the reads.
  const auto key_offsets = [&](int visit) {
    if (tid < Cfg::kKeys && visit < num_key_tiles) {
      sKeyOffset[(visit % Cfg::kOffsetSlots) * Cfg::kKeys + tid] =
          WgmmaKeyOffset<kWindow, D, 1>(args, tile, key_tiles, Cfg::kKeys, first_seen, visit, tid);
    }
  };
  const char* k_base = static_cast<const char*>(args.k_pool) + piece * 16;
  const char* v_base = static_cast<const char*>(args.v_pool) + piece * 16;
  const std::uint32_t staged = raw + static_cast<std::uint32_t>(tid) * 16;
  // Copies of a tile's codes into a staging slot, as one cp.async group.
  const auto stage = [&](bool is_v, int visit, int slot) {
    const std::int64_t* offsets = sKeyOffset + (visit % Cfg::kOffsetSlots) * Cfg::kKeys + row0;
    const char* base = is_v ? v_base : k_base;
    const std::uint32_t dst = staged + slot * Cfg::kRawSlotBytes;
    std::int64_t batch[kCopies];
#pragma unroll
    for (int k = 0; k < kCopies; ++k) batch[k] = offsets[static_cast<std::ptrdiff_t>(k) * kRowStep];
    if (WgmmaWholeTile<kWindow>(args, tile, key_tiles, Cfg::kKeys, first_seen, visit)) {
#pragma unroll
      for (int k = 0; k < kCopies; ++k) {
        CpAsync16(dst + k * Cfg::kLoaderThreads * 16, base + batch[k]);
      }
    } else {
      // Pool slots past a sequence's end may hold anything (a NaN code included): zero codes.
#pragma unroll
      for (int k = 0; k < kCopies; ++k) {
        const bool valid = batch[k] >= 0;
        CpAsync16(dst + k * Cfg::kLoaderThreads * 16, base + (valid ? batch[k] : 0),
                  valid ? 16 : 0);
      }
    }
    CpAsyncCommit();
  };
  // Rows row0 + k kRowStep share the swizzle term: this thread's two destination units are one
  // base each plus k kRowStep rows.
  const std::uint32_t dst_lo = SwizzledUnitOffset(row0, 2 * piece, Cfg::kKeys);
  const std::uint32_t dst_hi = SwizzledUnitOffset(row0, 2 * piece + 1, Cfg::kKeys);
  // A staged slot's codes to T in a K or V stage. Each piece's shared load goes out before the
  // piece before it is widened and stored: the loads and stores keep their program order (asm
  // with memory clobbers), and with each load right before its own use the loaders waited out
  // every load's latency (ncu, 4 x 2048: the computing warps' most sampled stall was waiting for
  // V tiles, the loaders' the short scoreboard of those loads).
  const auto widen = [&](std::uint32_t tile_at, int slot) {
    const std::uint32_t src = staged + slot * Cfg::kRawSlotBytes;
    uint4 codes = LoadShared128(src);
#pragma unroll
    for (int k = 0; k < kCopies; ++k) {
      uint4 next = codes;
      if (k + 1 < kCopies) next = LoadShared128(src + (k + 1) * Cfg::kLoaderThreads * 16);
      const std::uint32_t row_at = tile_at + k * kRowStep * 128;
      StoreShared128(row_at + dst_lo, DecodeFp8x8<T>(make_uint2(codes.x, codes.y)));
      StoreShared128(row_at + dst_hi, DecodeFp8x8<T>(make_uint2(codes.z, codes.w)));
      codes = next;
    }
  };
  // Job i: K_0 for i = 0, V_{n-1} for the last, else K_{(i+1)/2} for odd i and V_{i/2-1} for even.
  const int n = num_key_tiles, jobs = 2 * n;
  const auto job_visit = [n, jobs](int i, bool* is_v) {
    *is_v = i == jobs - 1 || (i > 0 && i % 2 == 0);
    return i == 0 ? 0 : i == jobs - 1 ? n - 1 : i % 2 == 1 ? (i + 1) / 2 : i / 2 - 1;
  };
  const auto stage_job = [&](int i) {
    bool is_v;
    const int visit = job_visit(i, &is_v);
    stage(is_v, visit, i % kSlots);
  };
  // Job i: job i + 2's copies go out first, then job i's codes (staged two jobs earlier) wait for
  // their stage to be free and are widened into it.
  const auto run_job = [&](int i) {
    if (i + 2 < jobs) {
      stage_job(i + 2);
      CpAsyncWait<2>();
    } else if (i + 1 < jobs) {
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    bool is_v;
    const int visit = job_visit(i, &is_v);
    const int empty = is_v ? Cfg::kVEmpty : Cfg::kKEmpty;
    const int full = is_v ? Cfg::kVFull : Cfg::kKFull;
    // Use n of a stage (n = visit / 2) waits for the release of use n - 1: phase parity n - 1.
    MbarrierWait(bar(empty + (visit & 1)), ((visit >> 1) & 1) ^ 1);
    widen((is_v ? sV : sK) + (visit & 1) * Cfg::kTileBytes, i % kSlots);
    MbarrierArrive(bar(full + (visit & 1)));
  };

  key_offsets(0);
  key_offsets(1);
  NamedBarrierSync(1, Cfg::kLoaderThreads);
  stage_job(0);
  stage_job(1);  // jobs >= 2: every sequence has a key tile
  // Step j runs K_j (j < n) and V_{j-1} (j > 0): jobs 2j - 1 and 2j (K_0 is job 0, V_{n-1} the
  // last), whose stagings read visits j and j + 1.
  int job = 0;
  for (int j = 0; j <= n; ++j) {
    NamedBarrierSync(1, Cfg::kLoaderThreads);
    key_offsets(j + 2);
    if (j < n) run_job(job++);
    if (j > 0) run_job(job++);
  }
}

}  // namespace inflight::kernels::cuda::detail
