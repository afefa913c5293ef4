// The context attention kernel over an FP8 KV cache (paged_batch.h KvFp8Scales): the mma.sync
// kernel's CTA, tiles, masks and AttendKeyTile (paged_attention_context_mma_sync.cuh), with its K/V
// tiles filled from the codes instead of by cp.async. Each thread loads its 8-byte pieces of key
// tile j + 1 into registers before tile j computes and, once it has, widens them to T (exactly:
// fp8_kv.cuh DecodeFp8x8) into the tile's shared-memory stage, so the global loads of the next tile
// overlap this one's mma as the cp.async double buffer's do. The scales stay outside the mma:
// k_scale in the launch's scale_log2, v_scale on the output before it is stored. Head dims 64 and
// 128 (Fp8KvHeadDimSupported) take it on every device but where the wgmma kernel runs (with
// paged_attention_context_wgmma_fp8.cuh's loader).
#pragma once

#include <climits>
#include <cmath>

#include "kernels/cuda/fp8_kv.cuh"
#include "kernels/cuda/paged_attention_context_impl.cuh"
#include "kernels/cuda/paged_attention_context_mma_sync.cuh"

namespace inflight::kernels::cuda::detail {

// Grid, block and shared memory: MmaSyncContextKernel's (Cfg a ContextTiling).
template <typename T, int D, typename Cfg, bool kWindow>
__global__ void __launch_bounds__(Cfg::kThreads) MmaSyncContextFp8Kernel(ContextArgs args) {
  static_assert(D % 16 == 0, "head_dim must be a multiple of 16");
  constexpr int kPitch = Cfg::kPitch;
  constexpr int kChunks = D / 8;  // 8-element pieces per row: 8 bytes of codes, 16 of T
  static_assert(Cfg::kKeys * kChunks % Cfg::kThreads == 0, "whole pieces per thread");
  constexpr int kLoads = Cfg::kKeys * kChunks / Cfg::kThreads;  // a thread's pieces of a tile
  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + Cfg::kQElems;
  T* sV = sK + 2 * Cfg::kTileElems;
  auto* sKeyOffset = reinterpret_cast<std::int64_t*>(sV + 2 * Cfg::kTileElems);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  ContextTile tile;
  if (!LocateContextTile<Cfg::kRows>(args, &tile)) return;
  const int head = tile.head, q_begin = tile.q_begin, q0 = tile.q0, rows = tile.rows;
  const int pos0 = tile.pos0, kv_end = tile.kv_end, kvh = tile.kvh;
  const std::int32_t* table = tile.table;
  const KeyTileRange key_tiles = ContextKeyTiles<kWindow>(args, tile, Cfg::kKeys);
  const int num_key_tiles = key_tiles.Count();
  const int tpb = args.tokens_per_block;
  const Fp8Code* k_pool = static_cast<const Fp8Code*>(args.k_pool);
  const Fp8Code* v_pool = static_cast<const Fp8Code*>(args.v_pool);

  {
    const T* q = static_cast<const T*>(args.q) +
                 static_cast<std::int64_t>(q_begin + q0) * args.q_token_stride +
                 static_cast<std::int64_t>(head) * D;
    for (int i = tid; i < Cfg::kRows * kChunks; i += Cfg::kThreads) {
      const int r = i / kChunks, c = i - r * kChunks;
      const bool valid = r < rows;
      const T* src = q + (valid ? static_cast<std::int64_t>(r) * args.q_token_stride +
                                      static_cast<std::int64_t>(c * 8)
                                : 0);
      CpAsync16(SharedAddress(sQ + r * kPitch + c * 8), src, valid ? 16 : 0);
    }
  }
  // Pool element offset of each key of visit j's tile (-1, a zero row, past kv_end and, with a
  // window, for keys no row of the CTA sees): MmaSyncContextKernel's.
  const int first_seen = kWindow ? max(0, pos0 - args.window + 1) : 0;
  auto key_offsets = [&](int j, std::int64_t* dst) {
    if (tid < Cfg::kKeys) {
      const int pos = key_tiles.Tile(j) * Cfg::kKeys + tid;
      std::int64_t offset = -1;
      if (pos < kv_end && (!kWindow || pos >= first_seen || pos < args.sink)) {
        const int block_index = pos / tpb;
        offset = ((static_cast<std::int64_t>(table[block_index]) * args.num_kv_heads + kvh) * tpb +
                  (pos - block_index * tpb)) *
                 D;
      }
      dst[tid] = offset;
    }
  };
  // Piece n of this thread: key row (tid + n kThreads) / kChunks, its piece c. Rows with no key
  // read nothing and hold zero codes (+0), never a NaN a pool slot may hold.
  uint2 k_codes[kLoads], v_codes[kLoads];
  auto fetch_kv = [&](const std::int64_t* offsets) {
#pragma unroll
    for (int n = 0; n < kLoads; ++n) {
      const int i = tid + n * Cfg::kThreads;
      const int r = i / kChunks, c = i - r * kChunks;
      const std::int64_t offset = offsets[r];
      k_codes[n] = v_codes[n] = make_uint2(0u, 0u);
      if (offset >= 0) {
        k_codes[n] = __ldg(reinterpret_cast<const uint2*>(k_pool + offset + c * 8));
        v_codes[n] = __ldg(reinterpret_cast<const uint2*>(v_pool + offset + c * 8));
      }
    }
  };
  auto store_kv = [&](int stage) {
    T* k_dst = sK + stage * Cfg::kTileElems;
    T* v_dst = sV + stage * Cfg::kTileElems;
#pragma unroll
    for (int n = 0; n < kLoads; ++n) {
      const int i = tid + n * Cfg::kThreads;
      const int r = i / kChunks, c = i - r * kChunks;
      *reinterpret_cast<uint4*>(k_dst + r * kPitch + c * 8) = DecodeFp8x8<T>(k_codes[n]);
      *reinterpret_cast<uint4*>(v_dst + r * kPitch + c * 8) = DecodeFp8x8<T>(v_codes[n]);
    }
  };

  CpAsyncCommit();  // the Q tile
  key_offsets(0, sKeyOffset);
  __syncthreads();
  fetch_kv(sKeyOffset);
  store_kv(0);
  if (num_key_tiles > 1) key_offsets(1, sKeyOffset + Cfg::kKeys);

  const int warp_row0 = warp * Cfg::kWarpRows;
  bool valid[Cfg::kMTiles];
  int last_pos[Cfg::kMTiles];
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
    valid[mt] = warp_row0 + 16 * mt < rows;
    last_pos[mt] = pos0 + min(rows, warp_row0 + 16 * mt + 16) - 1;
  }
  const int warp_last_pos = pos0 + min(rows, warp_row0 + Cfg::kWarpRows) - 1;
  ContextWarpState<D, Cfg::kMTiles> st;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      st.m[mt][hr] = -INFINITY;
      st.l[mt][hr] = 0.0f;
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) st.o[mt][n][e] = 0.0f;
  }
  ContextLaneAddrs addrs;
  addrs.q = SharedAddress(sQ + (warp_row0 + (lane & 15)) * kPitch + 8 * (lane >> 4));
  addrs.k = SharedAddress(sK + ((lane & 7) + 8 * (lane >> 4)) * kPitch + 8 * ((lane >> 3) & 1));
  addrs.v = SharedAddress(sV + ((lane & 7) + 8 * ((lane >> 3) & 1)) * kPitch + 8 * (lane >> 4));
  const int g = lane >> 2;

  for (int j = 0; j < num_key_tiles; ++j) {
    CpAsyncWait<0>();
    // Tile j's stage (stored at the end of the last iteration, or before the loop) is visible to
    // all; the other stage, read by tile j - 1, is free.
    __syncthreads();
    const bool more = j + 1 < num_key_tiles;
    if (more) fetch_kv(sKeyOffset + ((j + 1) & 1) * Cfg::kKeys);
    if (j + 2 < num_key_tiles) key_offsets(j + 2, sKeyOffset + (j & 1) * Cfg::kKeys);

    const int k0 = key_tiles.Tile(j) * Cfg::kKeys;
    bool active[Cfg::kMTiles];
    TileMask mask[Cfg::kMTiles];
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
      const int first_pos = pos0 + warp_row0 + 16 * mt;
      active[mt] = valid[mt] && k0 <= last_pos[mt];
      if (kWindow) {
        active[mt] =
            active[mt] && (k0 < args.sink || k0 + Cfg::kKeys - 1 > first_pos - args.window);
      }
      const int row_pos[2] = {first_pos + g, first_pos + g + 8};
      mask[mt] = MakeTileMask<kWindow>(args, row_pos, k0);
    }
    const bool diagonal = k0 + Cfg::kKeys - 1 > pos0 + warp_row0;
    const bool edge = kWindow && WindowEdgeTile(args, k0, Cfg::kKeys, warp_last_pos);
    const std::uint32_t stage_bytes = static_cast<std::uint32_t>((j & 1) * Cfg::kTileElems * 2);
    bool all_active = !diagonal && !edge;
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt) all_active = all_active && active[mt];
    bool any_active = false;
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt) any_active = any_active || active[mt];
    if (all_active) {
      AttendKeyTile<T, D, Cfg, true, kWindow>(st, addrs, stage_bytes, active, mask, args.scale_log2,
                                              lane);
    } else if (any_active) {
      AttendKeyTile<T, D, Cfg, false, kWindow>(st, addrs, stage_bytes, active, mask,
                                               args.scale_log2, lane);
    }
    if (more) store_kv((j + 1) & 1);
  }

  T* out_tile = static_cast<T*>(args.out) +
                (static_cast<std::int64_t>(q_begin + q0) * args.num_heads + head) * D;
  const float v_scale[2] = {args.v_scale, args.v_scale};
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
    RescaleOutput(st.o[mt], v_scale);  // V = code * v_scale
    StoreOutputRows(st.o[mt], st.l[mt], out_tile, static_cast<std::int64_t>(args.num_heads) * D,
                    warp_row0 + 16 * mt, rows, lane);
  }
}

template <typename T, int D, bool kWindow, typename Cfg = ContextTiling<D>>
cudaError_t LaunchContextAttentionFp8For(const ContextArgs& args, cudaStream_t stream) {
  constexpr int kSmemBytes = Cfg::kSmemBytes;
  const auto kernel = MmaSyncContextFp8Kernel<T, D, Cfg, kWindow>;
  // NOTE: as LaunchContextAttentionMmaSync: the opt-in above 48 KiB, the largest shared split.
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (err != cudaSuccess) return err;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared);
  if (err != cudaSuccess) return err;
  const std::int64_t blocks = ContextGridBlocks(args, Cfg::kRows);
  if (blocks > INT_MAX) return cudaErrorInvalidValue;
  if (blocks == 0) return cudaSuccess;
  kernel<<<static_cast<unsigned>(blocks), Cfg::kThreads, kSmemBytes, stream>>>(args);
  return cudaGetLastError();
}

// Where the wgmma kernel's sm_90a code runs (and INFLIGHT_CONTEXT_WGMMA is not 0), that kernel
// with its FP8 loader; elsewhere the mma.sync one above.
template <typename T, int D, bool kWindow>
cudaError_t LaunchContextAttentionFp8Kernel(const ContextArgs& args, cudaStream_t stream) {
  using Tiling = WgmmaContextTiling<D, D >= 128 ? 128 : 64>;
  // NOTE: decided once per process, for the device of the first call.
  static const bool wgmma = Sm90aCodeRuns(WgmmaContextKernel<T, D, Tiling, kWindow, true>);
  if (wgmma && ContextWgmmaAllowed()) {
    return LaunchContextAttentionWgmma<T, D, kWindow, Tiling, true>(args, stream);
  }
  return LaunchContextAttentionFp8For<T, D, kWindow>(args, stream);
}

template <typename T, int D>
cudaError_t LaunchContextAttentionFp8(const ContextArgs& args, cudaStream_t stream) {
  if (args.window > 0) return LaunchContextAttentionFp8Kernel<T, D, true>(args, stream);
  return LaunchContextAttentionFp8Kernel<T, D, false>(args, stream);
}

// One per head dim, defined in paged_attention_context_fp8_hd<D>.cu.
cudaError_t LaunchContextAttentionFp8Hd64(const ContextArgs& args, DType dtype,
                                          cudaStream_t stream);
cudaError_t LaunchContextAttentionFp8Hd128(const ContextArgs& args, DType dtype,
                                           cudaStream_t stream);

}  // namespace inflight::kernels::cuda::detail
