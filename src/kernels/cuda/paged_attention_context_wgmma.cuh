// The context attention kernel on Hopper's warpgroup tensor cores (wgmma, sm_90a), for head dims
// that are a multiple of 64: flash attention with both products on wgmma, P kept in registers, a
// loading warpgroup beside the computing ones, and the softmax of one key tile overlapped with the
// previous tile's P V.
#pragma once

#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/hopper_ptx.cuh"
#include "kernels/cuda/paged_attention_context_common.cuh"
#include "kernels/cuda/paged_attention_context_ptx.cuh"
#include "kernels/cuda/paged_attention_context_wgmma_fp8.cuh"
#include "kernels/cuda/paged_attention_context_wgmma_tiling.cuh"

namespace inflight::kernels::cuda::detail {

// The loading warpgroup: Q, then K_0, and per step j K_j (stage j % 2) and V_{j-1}, the order in
// which the computing warpgroups use them. Each thread copies one fixed 16-byte unit of every
// kRowStep-th row: a trip count known at compile time, so that the copies unroll into straight code
// and the swizzle term, which depends on row % 8, is one constant per thread. Step j loads the key
// tile of visit j (ContextKeyTiles: every tile without a window).
template <typename T, int D, typename Cfg, bool kWindow>
__device__ __forceinline__ void LoadContextTiles(const ContextArgs& args, const ContextTile& tile,
                                                 std::uint32_t sQ, std::uint32_t bars,
                                                 std::int64_t* sKeyOffset) {
  constexpr int kUnits = D / 8;  // 16-byte units per row
  static_assert(Cfg::kLoaderThreads % kUnits == 0, "whole rows per pass");
  constexpr int kRowStep = Cfg::kLoaderThreads / kUnits;
  static_assert(Cfg::kKeys % kRowStep == 0 && Cfg::kRows % kRowStep == 0, "whole passes");
  static_assert(Cfg::kKeys <= Cfg::kLoaderThreads, "one key offset per loader thread");
  const int tid = static_cast<int>(threadIdx.x);
  const int load_unit = tid % kUnits, load_row0 = tid / kUnits;
  const std::uint32_t sK = sQ + Cfg::kQBytes;
  const std::uint32_t sV = sK + 2 * Cfg::kTileBytes;
  const KeyTileRange key_tiles = ContextKeyTiles<kWindow>(args, tile, Cfg::kKeys);
  const int num_key_tiles = key_tiles.Count();
  const auto bar = [bars](int index) { return BarrierAt(bars, index); };

  LoadWgmmaQueryTile<T, D, Cfg>(args, tile, sQ);
  CpAsyncMbarrierArrive(bar(Cfg::kQFull));
  // Keys below it that are no sink no row of the CTA sees: zero-filled like those past kv_end.
  const int first_seen = kWindow ? max(0, tile.pos0 - args.window + 1) : 0;
  // Pool byte offset of each key of visit j's tile (-1: zero it), in a ring of three slots: step
  // j writes visit j + 1's after reading visits j's and j - 1's, and the loaders' barrier at the
  // top of each step orders the writes against the reads. (Reading the block-table entry a step
  // earlier measured 2-4% slower: a second integer division and a longer-lived register.)
  const auto key_offsets = [&](int visit) {
    if (tid < Cfg::kKeys && visit < num_key_tiles) {
      sKeyOffset[(visit % 3) * Cfg::kKeys + tid] = WgmmaKeyOffset<kWindow, D, sizeof(T)>(
          args, tile, key_tiles, Cfg::kKeys, first_seen, visit, tid);
    }
  };
  // Rows load_row0 + k kRowStep share the swizzle term (kRowStep is a multiple of 8): this
  // thread's destinations are one base plus k kRowStep rows.
  const std::uint32_t load_dst = SwizzledUnitOffset(load_row0, load_unit, Cfg::kKeys);
  const char* k_base =
      reinterpret_cast<const char*>(static_cast<const T*>(args.k_pool) + load_unit * 8);
  const char* v_base =
      reinterpret_cast<const char*>(static_cast<const T*>(args.v_pool) + load_unit * 8);
  // A tile's copies go out in batches whose offsets are read first: read one by one between the
  // copies (whose asm orders memory), each copy waited on its own shared-memory load, and the
  // loaders fell behind the computing warpgroups (+4-12% with batches of 8, round 13).
  constexpr int kCopies = Cfg::kKeys / kRowStep;
  constexpr int kBatch = kCopies < 8 ? kCopies : 8;
  static_assert(kCopies % kBatch == 0, "whole batches");
  const auto load_tile = [&](const char* base, std::uint32_t dst, int visit) {
    const std::int64_t* offsets = sKeyOffset + (visit % 3) * Cfg::kKeys + load_row0;
    dst += load_dst;
    const bool whole =
        WgmmaWholeTile<kWindow>(args, tile, key_tiles, Cfg::kKeys, first_seen, visit);
#pragma unroll
    for (int b = 0; b < kCopies; b += kBatch) {
      std::int64_t batch[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        batch[k] = offsets[static_cast<std::ptrdiff_t>(b + k) * kRowStep];
      if (whole) {
#pragma unroll
        for (int k = 0; k < kBatch; ++k) CpAsync16(dst + (b + k) * kRowStep * 128, base + batch[k]);
      } else {
        // Pool slots past a sequence's end may hold anything (NaN included): zero them.
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          const bool valid = batch[k] >= 0;
          CpAsync16(dst + (b + k) * kRowStep * 128, base + (valid ? batch[k] : 0), valid ? 16 : 0);
        }
      }
    }
  };

  key_offsets(0);
  for (int j = 0; j <= num_key_tiles; ++j) {
    NamedBarrierSync(1, Cfg::kLoaderThreads);
    if (j < num_key_tiles) {
      // Use n of a stage (n = j / 2) waits for the release of use n - 1: phase parity n - 1.
      MbarrierWait(bar(Cfg::kKEmpty + (j & 1)), ((j >> 1) & 1) ^ 1);
      load_tile(k_base, sK + (j & 1) * Cfg::kTileBytes, j);
      CpAsyncMbarrierArrive(bar(Cfg::kKFull + (j & 1)));
    }
    if (j > 0) {
      const int v = j - 1;
      MbarrierWait(bar(Cfg::kVEmpty + (v & 1)), ((v >> 1) & 1) ^ 1);
      load_tile(v_base, sV + (v & 1) * Cfg::kTileBytes, v);
      CpAsyncMbarrierArrive(bar(Cfg::kVFull + (v & 1)));
    }
    key_offsets(j + 1);
  }
  // Copies in flight must land before the thread exits.
  CpAsyncWait<0>();
}

// kWindow: the key tiles of ContextKeyTiles only (sinks, then the rows' windows), and the tiles on
// a window's edge masked as those on the diagonal are. kFp8: the pools hold an FP8 cache's codes
// (LoadContextTilesFp8 widens them to T; k_scale is in args.scale_log2, v_scale multiplies the
// output).
template <typename T, int D, typename Cfg, bool kWindow, bool kFp8 = false>
__global__ void __launch_bounds__(Cfg::kThreads, 1) WgmmaContextKernel(ContextArgs args) {
  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t raw_addr = SharedAddress(smem_raw);
  const std::uint32_t pad = ((raw_addr + 1023u) & ~1023u) - raw_addr;
  unsigned char* smem = smem_raw + pad;
  const std::uint32_t sQ = raw_addr + pad;
  const std::uint32_t sK = sQ + Cfg::kQBytes;
  const std::uint32_t sV = sK + 2 * Cfg::kTileBytes;
  auto* sKeyOffset = reinterpret_cast<std::int64_t*>(smem + Cfg::kOffsetsAt);
  const std::uint32_t bars = sQ + Cfg::kBarriersAt;
  const auto bar = [bars](int index) { return BarrierAt(bars, index); };
  constexpr int kMathWarps = Cfg::kMathThreads / 32;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    // Full barriers count the loaders' cp.async arrivals; empty ones one arrival per math warp.
    MbarrierInit(bar(Cfg::kQFull), Cfg::kLoaderThreads);
    for (int stage = 0; stage < 2; ++stage) {
      MbarrierInit(bar(Cfg::kKFull + stage), Cfg::kLoaderThreads);
      MbarrierInit(bar(Cfg::kKEmpty + stage), kMathWarps);
      MbarrierInit(bar(Cfg::kVFull + stage), Cfg::kLoaderThreads);
      MbarrierInit(bar(Cfg::kVEmpty + stage), kMathWarps);
    }
  }
  ContextTile tile;  // its __syncthreads also publishes the barriers' initialisation
  if (!LocateContextTile<Cfg::kRows>(args, &tile)) return;
  if (tid < Cfg::kLoaderThreads) {
    SetMaxRegistersDecrease<Cfg::kLoaderRegs>();
    if constexpr (kFp8) {
      LoadContextTilesFp8<T, D, Cfg, kWindow>(args, tile, sQ, bars, sKeyOffset, sQ + Cfg::kRawAt);
    } else {
      LoadContextTiles<T, D, Cfg, kWindow>(args, tile, sQ, bars, sKeyOffset);
    }
    return;
  }
  SetMaxRegistersIncrease<Cfg::kMathRegs>();

  const int mtid = tid - Cfg::kLoaderThreads, lane = mtid & 31, warp = mtid >> 5;
  // Broadcast from lane 0, the warpgroup and the trip count are warp-uniform to the compiler too,
  // so the wgmma descriptors and the loop live in uniform registers: computed in vector registers,
  // each wgmma waited on ~10 instructions of 64-bit adds and moves (ncu, 1 x 4096).
  const KeyTileRange key_tiles = ContextKeyTiles<kWindow>(args, tile, Cfg::kKeys);
  const int num_key_tiles = __shfl_sync(0xffffffffu, key_tiles.Count(), 0);
  const int group = __shfl_sync(0xffffffffu, warp >> 2, 0);
  const int group_row0 = 64 * group;
  const int warp_row0 = group_row0 + 16 * (warp & 3);
  const int pos0 = tile.pos0;
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const int row_pos[2] = {pos0 + warp_row0 + (lane >> 2), pos0 + warp_row0 + (lane >> 2) + 8};
  std::uint32_t p[Cfg::kKeys / 16][4];  // the previous tile's probabilities, the A of its P V

  // K-major operands: no leading offset (1 by convention), 8-row groups 1024 bytes apart. V:
  // MN-major, its 64-column blocks kKeys * 128 bytes apart.
  const std::uint64_t q_desc = SwizzledSmemDesc(sQ + group_row0 * 128, 16, 1024);
  const std::uint64_t k_desc = SwizzledSmemDesc(sK, 16, 1024);
  const std::uint64_t v_desc = SwizzledSmemDesc(sV, Cfg::kKeys * 128, 1024);
  const auto stage_of = [](int key_tile) {
    return static_cast<std::uint32_t>(((key_tile & 1) * Cfg::kTileBytes) >> 4);
  };
  // Waits for a buffer the loaders filled; the fence hands their (generic-proxy) copies to the
  // async proxy that wgmma reads through.
  const auto wait_full = [&](int full, int key_tile) {
    MbarrierWait(bar(full + (key_tile & 1)), (key_tile >> 1) & 1);
    FenceProxyAsyncShared();
  };
  // After this warp's wgmma wait: the stage may be refilled once every math warp said so.
  const auto release = [&](int empty, int key_tile) {
    if (lane == 0) MbarrierArrive(bar(empty + (key_tile & 1)));
  };
  const auto issue_s = [&](float(&s)[Cfg::kKeyFrags][4], int j) {
#pragma unroll
    for (int kc = 0; kc < D / 64; ++kc)
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const std::uint64_t a = SmemDescPlus(q_desc, (kc * Cfg::kRows * 128 + ks * 32) >> 4);
        const std::uint64_t b =
            SmemDescPlus(k_desc, stage_of(j) + ((kc * Cfg::kKeys * 128 + ks * 32) >> 4));
        WgmmaSS<T, Cfg::kKeys>(s, a, b, kc + ks > 0 ? 1 : 0);
      }
    WgmmaCommit();
  };
  const auto issue_pv = [&](int j) {
#pragma unroll
    for (int kk = 0; kk < Cfg::kKeys / 16; ++kk) {
      // 16 keys = two 8-row groups of the V tile.
      WgmmaRS<T, D>(o, p[kk], SmemDescPlus(v_desc, stage_of(j) + ((kk * 2048) >> 4)), 1);
    }
    WgmmaCommit();
  };
  // Scores of visit j's tile to unnormalised probabilities, in place; alpha rescales o to the new
  // max.
  const auto softmax = [&](float(&s)[Cfg::kKeyFrags][4], int j, float(&alpha)[2]) {
    const int k0 = key_tiles.Tile(j) * Cfg::kKeys;
    const TileMask mask = MakeTileMask<kWindow>(args, row_pos, k0);
    // Keys past the warpgroup's first row exist only in the tiles on the diagonal, keys out of a
    // row's window only in the tiles WindowEdgeTile finds (for the group's last row, which may be
    // past the query tile's: a conservative test).
    if (k0 + Cfg::kKeys - 1 > pos0 + group_row0 ||
        (kWindow && WindowEdgeTile(args, k0, Cfg::kKeys, pos0 + group_row0 + 63))) {
      OnlineSoftmaxScores<true, kWindow>(s, m, l, mask, args.scale_log2, lane, alpha);
    } else {
      OnlineSoftmaxScores<false, false>(s, m, l, mask, args.scale_log2, lane, alpha);
    }
  };
  const auto pack = [&](const float(&s)[Cfg::kKeyFrags][4]) {
#pragma unroll
    for (int kk = 0; kk < Cfg::kKeys / 16; ++kk) PackProbabilities<T>(s, kk, p[kk]);
  };

  // Software pipeline (flash attention 3's intra-warpgroup overlap): step j issues S_j = Q K_jᵀ and
  // then P_{j-1} V_{j-1}, waits for S_j only, and runs the softmax of S_j on the CUDA cores while
  // the tensor cores finish P_{j-1} V_{j-1}; O is rescaled once that is done. Every wgmma sits on
  // a straight path (no per-warpgroup branch around it): a divergent path makes ptxas serialise
  // the asynchronous wgmmas. A warpgroup whose rows end a tile earlier than the other's (a chunk
  // that starts off a tile boundary) computes that tile fully masked.
  MbarrierWait(bar(Cfg::kQFull), 0);  // Q: one fill, phase 0
  FenceProxyAsyncShared();
  {
    wait_full(Cfg::kKFull, 0);
    float s[Cfg::kKeyFrags][4], alpha[2];
    WgmmaFence();
    PinAccumulators(s);
    issue_s(s, 0);
    WgmmaWait<0>();
    PinAccumulators(s);
    release(Cfg::kKEmpty, 0);
    softmax(s, 0, alpha);  // o is still zero: no rescale
    pack(s);
  }
  for (int j = 1; j < num_key_tiles; ++j) {
    float s[Cfg::kKeyFrags][4], alpha[2];
    wait_full(Cfg::kKFull, j);
    wait_full(Cfg::kVFull, j - 1);
    WgmmaFence();
    PinAccumulators(s);
    PinAccumulators(o);
    issue_s(s, j);
    issue_pv(j - 1);
    WgmmaWait<1>();
    PinAccumulators(s);
    release(Cfg::kKEmpty, j);
    softmax(s, j, alpha);
    WgmmaWait<0>();
    PinAccumulators(o);
    PinFragments(p);
    release(Cfg::kVEmpty, j - 1);
    RescaleOutput(o, alpha);
    pack(s);  // P_{j-1} V_{j-1} is done with p
  }
  wait_full(Cfg::kVFull, num_key_tiles - 1);
  WgmmaFence();
  PinAccumulators(o);
  issue_pv(num_key_tiles - 1);
  WgmmaWait<0>();
  PinAccumulators(o);
  PinFragments(p);

  T* out_tile =
      static_cast<T*>(args.out) +
      (static_cast<std::int64_t>(tile.q_begin + tile.q0) * args.num_heads + tile.head) * D;
  if constexpr (kFp8) {
    const float v_scale[2] = {args.v_scale, args.v_scale};
    RescaleOutput(o, v_scale);  // V = code * v_scale
  }
  StoreOutputRows(o, l, out_tile, static_cast<std::int64_t>(args.num_heads) * D, warp_row0,
                  tile.rows, lane);
}

template <typename T, int D, bool kWindow, typename Cfg = WgmmaContextTiling<D>, bool kFp8 = false>
cudaError_t LaunchContextAttentionWgmma(const ContextArgs& args, cudaStream_t stream) {
  constexpr int kSmemBytes = kFp8 ? Cfg::kFp8SmemBytes : Cfg::kSmemBytes;
  const auto kernel = WgmmaContextKernel<T, D, Cfg, kWindow, kFp8>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (err != cudaSuccess) return err;
  const std::int64_t blocks = ContextGridBlocks(args, Cfg::kRows);
  if (blocks > INT_MAX) return cudaErrorInvalidValue;
  if (blocks == 0) return cudaSuccess;
  kernel<<<static_cast<unsigned>(blocks), Cfg::kThreads, kSmemBytes, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace inflight::kernels::cuda::detail
