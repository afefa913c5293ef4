// The context attention kernel on mma.sync tensor cores (flash attention 2; sm_80 and later), for
// every head dim that is a multiple of 16.
#pragma once

#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_attention_context_common.cuh"
#include "kernels/cuda/paged_attention_context_ptx.cuh"

namespace inflight::kernels::cuda::detail {

// A CTA of 4 warps owns 16 * kMTiles rows per warp of one head of one sequence and walks the keys
// kKeys at a time. Two m16 tiles per warp make every K/V fragment read from shared memory feed two
// mmas (shared memory bandwidth is the limit of mma.sync on Hopper). Registers per thread:
// kKeys / 8 * kMTiles scores and D / 2 * kMTiles output accumulators.
template <int D, int kMTilesArg = 2, int kKeysArg = 64>
struct ContextTiling {
  static constexpr int kMTiles = kMTilesArg;
  static constexpr int kKeys = kKeysArg;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = 16 * kMTiles;
  static constexpr int kRows = kWarpRows * kWarps;
  static constexpr int kKeyFrags = kKeys / 8;  // n8 score fragments per m tile
  // Shared memory: Q [kRows][D + 8], K and V [2 stages][kKeys][D + 8], then the pool offsets of the
  // keys of 2 tiles. The 16-byte row pad makes the row pitch an odd number of 16-byte units, so the
  // 8 rows that one ldmatrix phase reads fall in 8 different bank groups (no conflicts) for every
  // head dim (64, 80, 96, 128; an XOR swizzle would need a power-of-two chunk count).
  static constexpr int kPitch = D + 8;  // elements
  static constexpr int kQElems = kRows * kPitch;
  static constexpr int kTileElems = kKeys * kPitch;
  static constexpr int kSmemBytes = (kQElems + 4 * kTileElems) * 2 + 2 * kKeys * 8;
};

// The running softmax state and output of one warp's rows. Thread (g = lane / 4, t = lane % 4)
// holds rows g and g + 8 of each m tile (index hr = 0, 1): o[mt][n][2 hr + e] is column 8 n + 2 t +
// e, m and l the row's running max (base 2, scaled) and its thread-partial sum of exponentials.
template <int D, int kMTiles>
struct ContextWarpState {
  float o[kMTiles][D / 8][4];
  float m[kMTiles][2];
  float l[kMTiles][2];
};

// Lane addresses (bytes, shared window) of the fragments a warp reads with ldmatrix; each step adds
// a compile-time offset.
struct ContextLaneAddrs {
  std::uint32_t q;  // row (lane % 16) of the warp's rows, column 8 (lane / 16)
  std::uint32_t k;  // key (lane % 8) + 8 (lane / 16), column 8 ((lane / 8) % 2), stage 0
  std::uint32_t v;  // key (lane % 8) + 8 ((lane / 8) % 2), column 8 (lane / 16), stage 0
};

// Scores of one key tile against the warp's rows, the online softmax update, and O += P V. kFull:
// both m tiles take part and every row sees every key of the tile (no mask). Otherwise m tile mt
// takes part when active[mt], and mask[mt] hides the keys its rows do not see: past the row, and
// with kWindow out of its window.
template <typename T, int D, typename Cfg, bool kFull, bool kWindow>
__device__ __forceinline__ void AttendKeyTile(ContextWarpState<D, Cfg::kMTiles>& st,
                                              const ContextLaneAddrs& a, std::uint32_t stage_bytes,
                                              const bool (&active)[Cfg::kMTiles],
                                              const TileMask (&mask)[Cfg::kMTiles],
                                              float scale_log2, int lane) {
  constexpr int kPitchBytes = Cfg::kPitch * 2;
  float s[Cfg::kMTiles][Cfg::kKeyFrags][4];
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
#pragma unroll
    for (int n = 0; n < Cfg::kKeyFrags; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][n][e] = 0.0f;
  }
  // S = Q K^T: B[k][n] = K[key n][dim k], which is K's row-major tile read without transposing.
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    std::uint32_t qa[Cfg::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
      if (kFull || active[mt]) LdMatrixX4(qa[mt], a.q + mt * 16 * kPitchBytes + kk * 32);
    }
#pragma unroll
    for (int np = 0; np < Cfg::kKeys / 16; ++np) {
      std::uint32_t kb[4];
      LdMatrixX4(kb, a.k + stage_bytes + np * 16 * kPitchBytes + kk * 32);
#pragma unroll
      for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
        if (kFull || active[mt]) {
          MmaM16N8K16<T>(s[mt][2 * np], qa[mt], kb[0], kb[1]);
          MmaM16N8K16<T>(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }
  }

#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
    if (kFull || active[mt]) {
      OnlineSoftmaxStep<!kFull, !kFull && kWindow>(s[mt], st.o[mt], st.m[mt], st.l[mt], mask[mt],
                                                   scale_log2, lane);
    }
  }

  // O += P V: P's accumulator layout is the A fragment layout of the next mma (no shared memory
  // trip); B[k][n] = V[key k][dim n] needs the transposing ldmatrix.
#pragma unroll
  for (int kk = 0; kk < Cfg::kKeys / 16; ++kk) {
    std::uint32_t pa[Cfg::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt) PackProbabilities<T>(s[mt], kk, pa[mt]);
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      std::uint32_t vb[4];
      LdMatrixX4Trans(vb, a.v + stage_bytes + kk * 16 * kPitchBytes + dp * 32);
#pragma unroll
      for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
        if (kFull || active[mt]) {
          MmaM16N8K16<T>(st.o[mt][2 * dp], pa[mt], vb[0], vb[1]);
          MmaM16N8K16<T>(st.o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
  }
}

// Grid: (num_heads x query-tile slots) flattened, head fastest so that the heads sharing a kv head
// run side by side and share its K/V tiles in L2. Block: Cfg::kThreads. K/V tiles are double
// buffered: tile j + 1 is in flight (cp.async) while tile j is computed. Keys past the tile's
// causal range, and query rows past the sequence, are zero-filled, never loaded: a pool slot past a
// sequence's end may hold NaN, and NaN * 0 is NaN in an mma. kWindow: the CTA visits only the key
// tiles of ContextKeyTiles (sinks, then its rows' windows), zero-fills the keys no row of it sees
// (never read: a cache may drop them), and an m tile skips a tile none of its rows sees.
template <typename T, int D, typename Cfg, bool kWindow>
__global__ void __launch_bounds__(Cfg::kThreads) MmaSyncContextKernel(ContextArgs args) {
  static_assert(D % 16 == 0, "head_dim must be a multiple of 16");
  constexpr int kPitch = Cfg::kPitch;
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
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
  const T* k_pool = static_cast<const T*>(args.k_pool);
  const T* v_pool = static_cast<const T*>(args.v_pool);

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
  // window, for keys no row of the CTA sees): one integer division per key.
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
  auto load_kv = [&](int stage, const std::int64_t* offsets) {
    T* k_dst = sK + stage * Cfg::kTileElems;
    T* v_dst = sV + stage * Cfg::kTileElems;
#pragma unroll
    for (int i = tid; i < Cfg::kKeys * kChunks; i += Cfg::kThreads) {
      const int r = i / kChunks, c = i - r * kChunks;
      const std::int64_t offset = offsets[r];
      const bool valid = offset >= 0;
      const std::int64_t src = valid ? offset + static_cast<std::int64_t>(c * 8) : 0;
      CpAsync16(SharedAddress(k_dst + r * kPitch + c * 8), k_pool + src, valid ? 16 : 0);
      CpAsync16(SharedAddress(v_dst + r * kPitch + c * 8), v_pool + src, valid ? 16 : 0);
    }
  };

  key_offsets(0, sKeyOffset);
  __syncthreads();
  load_kv(0, sKeyOffset);
  CpAsyncCommit();  // with the Q tile
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
    __syncthreads();  // tile j is visible to all; tile j - 1's buffers are free
    if (j + 1 < num_key_tiles) {
      load_kv((j + 1) & 1, sKeyOffset + ((j + 1) & 1) * Cfg::kKeys);
      CpAsyncCommit();
    }
    if (j + 2 < num_key_tiles) key_offsets(j + 2, sKeyOffset + (j & 1) * Cfg::kKeys);

    const int k0 = key_tiles.Tile(j) * Cfg::kKeys;
    bool active[Cfg::kMTiles];
    TileMask mask[Cfg::kMTiles];
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
      const int first_pos = pos0 + warp_row0 + 16 * mt;
      active[mt] = valid[mt] && k0 <= last_pos[mt];
      // Some row of the m tile sees a sink of the tile, or a key at or after its first row's
      // window start.
      if (kWindow) {
        active[mt] =
            active[mt] && (k0 < args.sink || k0 + Cfg::kKeys - 1 > first_pos - args.window);
      }
      const int row_pos[2] = {first_pos + g, first_pos + g + 8};
      mask[mt] = MakeTileMask<kWindow>(args, row_pos, k0);
    }
    // Keys past the warp's first row exist only in the tiles on the diagonal; keys out of a row's
    // window only in the tiles that WindowEdgeTile finds.
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
  }

  T* out_tile = static_cast<T*>(args.out) +
                (static_cast<std::int64_t>(q_begin + q0) * args.num_heads + head) * D;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
    StoreOutputRows(st.o[mt], st.l[mt], out_tile, static_cast<std::int64_t>(args.num_heads) * D,
                    warp_row0 + 16 * mt, rows, lane);
  }
}

template <typename T, int D, bool kWindow, typename Cfg = ContextTiling<D>>
cudaError_t LaunchContextAttentionMmaSync(const ContextArgs& args, cudaStream_t stream) {
  constexpr int kSmemBytes = Cfg::kSmemBytes;
  const auto kernel = MmaSyncContextKernel<T, D, Cfg, kWindow>;
  // NOTE: above 48 KiB dynamic shared memory needs an opt-in per kernel; it is idempotent. The
  // carveout asks for the largest shared memory split so that two CTAs fit on an SM.
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

}  // namespace inflight::kernels::cuda::detail
