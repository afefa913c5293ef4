// The wgmma context attention kernel's CTA shape and shared-memory plan, and what both of its
// loaders (paged_attention_context_wgmma.cuh for fp16 / bf16 pools,
// paged_attention_context_wgmma_fp8.cuh for an FP8 cache) share with its computing warpgroups.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_attention_context_common.cuh"
#include "kernels/cuda/paged_attention_context_ptx.cuh"

namespace inflight::kernels::cuda::detail {

// Warp-specialised (after flash attention 3): one loading warpgroup fills Q and a two-stage ring of
// K and V tiles and announces each on an mbarrier; kWarpGroups computing warpgroups of 64 query
// rows each consume them and hand each stage back on another mbarrier, so no barrier spans the
// whole CTA inside the key loop. kKeys keys a K/V tile. Shared memory holds Q, K and V as
// [D / 64 column blocks][rows][64 elements] in 128-byte swizzle atoms (16-byte unit u of row r at
// u ^ (r % 8)): the canonical layout wgmma reads, K-major for Q and K, MN-major for V (the B
// operand of P V, whose K dimension is the key).
template <int D, int kKeysArg = 128, int kWarpGroupsArg = 2>
struct WgmmaContextTiling {
  static_assert(D % 64 == 0, "the wgmma kernel needs whole 128-byte swizzle rows");
  static constexpr int kKeys = kKeysArg;
  static constexpr int kWarpGroups = kWarpGroupsArg;
  static constexpr int kLoaderThreads = 128;
  static constexpr int kMathThreads = 128 * kWarpGroups;
  static constexpr int kThreads = kLoaderThreads + kMathThreads;
  static constexpr int kRows = 64 * kWarpGroups;
  static constexpr int kKeyFrags = kKeys / 8;
  static constexpr int kQBytes = kRows * D * 2;
  static constexpr int kTileBytes = kKeys * D * 2;
  // The pool byte offset of every key of a tile, for four tile visits in a ring (the FP8 loader
  // reads two visits ahead; the fp16 / bf16 one uses three of the slots).
  static constexpr int kOffsetSlots = 4;
  static constexpr int kOffsetBytes = kOffsetSlots * kKeys * 8;
  // Barriers: Q full, then K full, K empty, V full and V empty for each of the two stages.
  static constexpr int kQFull = 0, kKFull = 1, kKEmpty = 3, kVFull = 5, kVEmpty = 7, kBarriers = 9;
  // Register split (setmaxnreg; multiples of 8 whose total fits the launch's allocation): the
  // computing warpgroups hold S, O and P (~200 registers), the loaders little more than addresses.
  static constexpr int kLoaderRegs = 40;
  static constexpr int kMathRegs = 232;
  // The launch gives every thread 65536 / kThreads registers (rounded down to 8), and setmaxnreg
  // only moves them between warpgroups: a split above that total leaves the increase waiting
  // forever (a hang, not an error), as a 64 / 224 split did.
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static_assert(kLoaderThreads * kLoaderRegs + kMathThreads * kMathRegs <= kThreads * kLaunchRegs,
                "register split above what the launch allocates");
  // Offsets from the 1024-byte aligned base: Q, the K and V stages, the key offsets, the barriers.
  static constexpr int kOffsetsAt = kQBytes + 4 * kTileBytes;
  static constexpr int kBarriersAt = kOffsetsAt + kOffsetBytes;
  // An FP8 cache's codes land first in three staging slots of a whole tile (one byte a value),
  // whose widening to T fills the stages above: 128-byte aligned after the barriers.
  static constexpr int kRawAt = (kBarriersAt + kBarriers * 8 + 127) / 128 * 128;
  static constexpr int kRawSlots = 3;
  static constexpr int kRawSlotBytes = kKeys * D;
  // + 1024: the dynamic shared memory base is aligned up to the swizzle atom by hand.
  static constexpr int kSmemBytes = kBarriersAt + kBarriers * 8 + 1024;
  static constexpr int kFp8SmemBytes = kRawAt + kRawSlots * kRawSlotBytes + 1024;
};

// Byte offset of 16-byte unit `unit` (along D) of row `row` in a swizzled tile of `rows` rows.
__device__ __forceinline__ std::uint32_t SwizzledUnitOffset(int row, int unit, int rows) {
  return static_cast<std::uint32_t>((unit >> 3) * rows * 128 + row * 128 +
                                    (((unit & 7) ^ (row & 7)) << 4));
}

// Shared-memory address of barrier `index` (WgmmaContextTiling::kQFull ...) of the array at bars.
__device__ __forceinline__ std::uint32_t BarrierAt(std::uint32_t bars, int index) {
  return bars + 8 * static_cast<std::uint32_t>(index);
}

// The loaders' first copies: the CTA's query rows into the swizzled Q tile by cp.async (rows past
// the tile's zero-filled), each loader thread one fixed 16-byte unit of every kRowStep-th row.
template <typename T, int D, typename Cfg>
__device__ __forceinline__ void LoadWgmmaQueryTile(const ContextArgs& args, const ContextTile& tile,
                                                   std::uint32_t sQ) {
  constexpr int kUnits = D / 8;
  constexpr int kRowStep = Cfg::kLoaderThreads / kUnits;
  static_assert(Cfg::kLoaderThreads % kUnits == 0 && Cfg::kRows % kRowStep == 0, "whole passes");
  const int tid = static_cast<int>(threadIdx.x);
  const int load_unit = tid % kUnits, load_row0 = tid / kUnits;
  const T* q = static_cast<const T*>(args.q) +
               static_cast<std::int64_t>(tile.q_begin + tile.q0) * args.q_token_stride +
               static_cast<std::int64_t>(tile.head) * D;
#pragma unroll
  for (int k = 0; k < Cfg::kRows / kRowStep; ++k) {
    const int r = load_row0 + k * kRowStep;
    const bool valid = r < tile.rows;
    const T* src = q + (valid ? static_cast<std::int64_t>(r) * args.q_token_stride +
                                    static_cast<std::int64_t>(load_unit * 8)
                              : 0);
    CpAsync16(sQ + SwizzledUnitOffset(r, load_unit, Cfg::kRows), src, valid ? 16 : 0);
  }
}

// The pool offset, in bytes, of key `key` of visit `visit`'s tile (rows of D elements of
// kElemBytes), or -1 where the key must read as zero: past the tile's kv_end, and with a window
// below every row's window unless a sink.
template <bool kWindow, int D, int kElemBytes>
__device__ __forceinline__ std::int64_t WgmmaKeyOffset(const ContextArgs& args,
                                                       const ContextTile& tile,
                                                       const KeyTileRange& key_tiles, int keys,
                                                       int first_seen, int visit, int key) {
  const int pos = key_tiles.Tile(visit) * keys + key;
  if (pos >= tile.kv_end || (kWindow && pos < first_seen && pos >= args.sink)) return -1;
  const int tpb = args.tokens_per_block;
  const int block_index = pos / tpb;
  return ((static_cast<std::int64_t>(tile.table[block_index]) * args.num_kv_heads + tile.kvh) *
              tpb +
          (pos - block_index * tpb)) *
         (D * static_cast<std::int64_t>(kElemBytes));
}

// Whether every key of visit `visit`'s tile exists (all tiles but a sequence's last and, with a
// window, those holding keys no row sees): copies need no checks and no zero fill.
template <bool kWindow>
__device__ __forceinline__ bool WgmmaWholeTile(const ContextArgs& args, const ContextTile& tile,
                                               const KeyTileRange& key_tiles, int keys,
                                               int first_seen, int visit) {
  const int k0 = key_tiles.Tile(visit) * keys;
  return k0 + keys <= tile.kv_end && (!kWindow || k0 >= first_seen || k0 + keys <= args.sink);
}

}  // namespace inflight::kernels::cuda::detail
