// The context attention kernel on Hopper's warpgroup tensor cores (wgmma, sm_90a), for head dims
// that are a multiple of 64: flash attention 2 with both products on wgmma, P kept in registers.
#pragma once

#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_attention_context_common.cuh"
#include "kernels/cuda/paged_attention_context_ptx.cuh"
#include "kernels/cuda/paged_attention_context_wgmma_ptx.cuh"

namespace inflight::kernels::cuda::detail {

// kWarpGroups warpgroups of 64 query rows each; kKeys keys a K/V tile. Shared memory holds Q, K and
// V as [D / 64 column blocks][rows][64 elements] in 128-byte swizzle atoms (16-byte unit u of row r
// at u ^ (r % 8)): the canonical layout wgmma reads, K-major for Q and K, MN-major for V (the B
// operand of P V, whose K dimension is the key).
template <int D, int kKeysArg = 128, int kWarpGroupsArg = 2>
struct WgmmaContextTiling {
  static_assert(D % 64 == 0, "the wgmma kernel needs whole 128-byte swizzle rows");
  static constexpr int kKeys = kKeysArg;
  static constexpr int kWarpGroups = kWarpGroupsArg;
  static constexpr int kThreads = 128 * kWarpGroups;
  static constexpr int kRows = 64 * kWarpGroups;
  static constexpr int kKeyFrags = kKeys / 8;
  static constexpr int kQBytes = kRows * D * 2;
  static constexpr int kTileBytes = kKeys * D * 2;
  // + 1024: the dynamic shared memory base is aligned up to the swizzle atom by hand.
  static constexpr int kSmemBytes = kQBytes + 4 * kTileBytes + 2 * kKeys * 8 + 1024;
};

// Byte offset of 16-byte unit `unit` (along D) of row `row` in a swizzled tile of `rows` rows.
__device__ __forceinline__ std::uint32_t SwizzledUnitOffset(int row, int unit, int rows) {
  return static_cast<std::uint32_t>((unit >> 3) * rows * 128 + row * 128 +
                                    (((unit & 7) ^ (row & 7)) << 4));
}

template <typename T, int D, typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1) WgmmaContextKernel(ContextArgs args) {
  constexpr int kUnits = D / 8;  // 16-byte units per row
  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t raw_addr = SharedAddress(smem_raw);
  const std::uint32_t pad = ((raw_addr + 1023u) & ~1023u) - raw_addr;
  unsigned char* smem = smem_raw + pad;
  const std::uint32_t sQ = raw_addr + pad;
  const std::uint32_t sK = sQ + Cfg::kQBytes;
  const std::uint32_t sV = sK + 2 * Cfg::kTileBytes;
  auto* sKeyOffset = reinterpret_cast<std::int64_t*>(smem + Cfg::kQBytes + 4 * Cfg::kTileBytes);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  ContextTile tile;
  if (!LocateContextTile<Cfg::kRows>(args, &tile)) return;
  const int head = tile.head, q_begin = tile.q_begin, q0 = tile.q0, rows = tile.rows;
  const int pos0 = tile.pos0, kv_end = tile.kv_end, kvh = tile.kvh;
  const std::int32_t* table = tile.table;
  const int num_key_tiles = (kv_end + Cfg::kKeys - 1) / Cfg::kKeys;
  const int tpb = args.tokens_per_block;
  const T* k_pool = static_cast<const T*>(args.k_pool);
  const T* v_pool = static_cast<const T*>(args.v_pool);

  {
    const T* q = static_cast<const T*>(args.q) +
                 static_cast<std::int64_t>(q_begin + q0) * args.q_token_stride +
                 static_cast<std::int64_t>(head) * D;
#pragma unroll
    for (int i = tid; i < Cfg::kRows * kUnits; i += Cfg::kThreads) {
      const int r = i / kUnits, u = i - r * kUnits;
      const bool valid = r < rows;
      const T* src = q + (valid ? static_cast<std::int64_t>(r) * args.q_token_stride + u * 8 : 0);
      CpAsync16(sQ + SwizzledUnitOffset(r, u, Cfg::kRows), src, valid ? 16 : 0);
    }
  }
  // Pool element offset of each key of a tile (-1 past kv_end): one integer division per key.
  auto key_offsets = [&](int key_tile, std::int64_t* dst) {
    if (tid < Cfg::kKeys) {
      const int pos = key_tile * Cfg::kKeys + tid;
      std::int64_t offset = -1;
      if (pos < kv_end) {
        const int block_index = pos / tpb;
        offset = ((static_cast<std::int64_t>(table[block_index]) * args.num_kv_heads + kvh) * tpb +
                  (pos - block_index * tpb)) *
                 D;
      }
      dst[tid] = offset;
    }
  };
  auto load_kv = [&](int stage, const std::int64_t* offsets) {
    const std::uint32_t k_dst = sK + stage * Cfg::kTileBytes;
    const std::uint32_t v_dst = sV + stage * Cfg::kTileBytes;
#pragma unroll
    for (int i = tid; i < Cfg::kKeys * kUnits; i += Cfg::kThreads) {
      const int r = i / kUnits, u = i - r * kUnits;
      const std::int64_t offset = offsets[r];
      const bool valid = offset >= 0;
      const std::int64_t src = valid ? offset + u * 8 : 0;
      const std::uint32_t at = SwizzledUnitOffset(r, u, Cfg::kKeys);
      CpAsync16(k_dst + at, k_pool + src, valid ? 16 : 0);
      CpAsync16(v_dst + at, v_pool + src, valid ? 16 : 0);
    }
  };

  key_offsets(0, sKeyOffset);
  __syncthreads();
  load_kv(0, sKeyOffset);
  CpAsyncCommit();  // with the Q tile
  if (num_key_tiles > 1) key_offsets(1, sKeyOffset + Cfg::kKeys);

  const int group = warp >> 2;
  const int group_row0 = 64 * group;
  const int warp_row0 = group_row0 + 16 * (warp & 3);
  const bool group_valid = group_row0 < rows;
  const int group_last_pos = pos0 + min(rows, group_row0 + 64) - 1;
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  int mask_base[2];
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) mask_base[hr] = pos0 + warp_row0 + (lane >> 2) + 8 * hr;

  // K-major operands: no leading offset (1 by convention), 8-row groups 1024 bytes apart. V:
  // MN-major, its 64-column blocks kKeys * 128 bytes apart.
  const std::uint64_t q_desc = SwizzledSmemDesc(sQ + group_row0 * 128, 16, 1024);
  const std::uint64_t k_desc = SwizzledSmemDesc(sK, 16, 1024);
  const std::uint64_t v_desc = SwizzledSmemDesc(sV, Cfg::kKeys * 128, 1024);

  for (int j = 0; j < num_key_tiles; ++j) {
    CpAsyncWait<0>();
    FenceProxyAsyncShared();
    __syncthreads();  // tile j is visible to all (and to wgmma); tile j - 1's buffers are free
    if (j + 1 < num_key_tiles) {
      load_kv((j + 1) & 1, sKeyOffset + ((j + 1) & 1) * Cfg::kKeys);
      CpAsyncCommit();
    }
    if (j + 2 < num_key_tiles) key_offsets(j + 2, sKeyOffset + (j & 1) * Cfg::kKeys);

    const int k0 = j * Cfg::kKeys;
    // Warpgroup-uniform: a warpgroup whose rows all precede the tile, or that has no rows, skips
    // it.
    if (!group_valid || k0 > group_last_pos) continue;
    const std::uint64_t stage = static_cast<std::uint64_t>(((j & 1) * Cfg::kTileBytes) >> 4);

    float s[Cfg::kKeyFrags][4];
#pragma unroll
    for (int n = 0; n < Cfg::kKeyFrags; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
    WgmmaFence();
    PinAccumulators(s);
#pragma unroll
    for (int kc = 0; kc < D / 64; ++kc)
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const std::uint64_t a = q_desc + ((kc * Cfg::kRows * 128 + ks * 32) >> 4);
        const std::uint64_t b = k_desc + stage + ((kc * Cfg::kKeys * 128 + ks * 32) >> 4);
        WgmmaSS<T, Cfg::kKeys>(s, a, b, kc + ks > 0 ? 1 : 0);
      }
    WgmmaCommit();
    WgmmaWait<0>();
    PinAccumulators(s);

    int mask_limit[2] = {mask_base[0] - k0, mask_base[1] - k0};
    // Keys past the warpgroup's first row exist only in the tiles on the diagonal.
    if (k0 + Cfg::kKeys - 1 > pos0 + group_row0) {
      OnlineSoftmaxStep<true>(s, o, m, l, mask_limit, args.scale_log2, lane);
    } else {
      OnlineSoftmaxStep<false>(s, o, m, l, mask_limit, args.scale_log2, lane);
    }
    std::uint32_t p[Cfg::kKeys / 16][4];
#pragma unroll
    for (int kk = 0; kk < Cfg::kKeys / 16; ++kk) PackProbabilities<T>(s, kk, p[kk]);

    WgmmaFence();
    PinAccumulators(o);
#pragma unroll
    for (int kk = 0; kk < Cfg::kKeys / 16; ++kk) {
      // 16 keys = two 8-row groups of the V tile.
      WgmmaRS<T, D>(o, p[kk], v_desc + stage + ((kk * 2048) >> 4), 1);
    }
    WgmmaCommit();
    WgmmaWait<0>();
    PinAccumulators(o);
  }

  T* out_tile = static_cast<T*>(args.out) +
                (static_cast<std::int64_t>(q_begin + q0) * args.num_heads + head) * D;
  StoreOutputRows(o, l, out_tile, static_cast<std::int64_t>(args.num_heads) * D, warp_row0, rows,
                  lane);
}

// True when the wgmma kernel's sm_90a code is what the device would run (a build without
// 90a-real, or a device other than compute capability 9.0, runs the mma.sync kernel instead).
template <typename T, int D, typename Cfg>
bool WgmmaContextKernelRunnable() {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, WgmmaContextKernel<T, D, Cfg>) != cudaSuccess) {
    cudaGetLastError();  // NOTE: clear the error: the caller falls back, it is not a failure
    return false;
  }
  return attr.binaryVersion == 90 && attr.ptxVersion >= 90;
}

template <typename T, int D, typename Cfg = WgmmaContextTiling<D>>
cudaError_t LaunchContextAttentionWgmma(const ContextArgs& args, cudaStream_t stream) {
  constexpr int kSmemBytes = Cfg::kSmemBytes;
  cudaError_t err = cudaFuncSetAttribute(WgmmaContextKernel<T, D, Cfg>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (err != cudaSuccess) return err;
  const std::int64_t blocks = ContextGridBlocks(args, Cfg::kRows);
  if (blocks > INT_MAX) return cudaErrorInvalidValue;
  if (blocks == 0) return cudaSuccess;
  WgmmaContextKernel<T, D, Cfg>
      <<<static_cast<unsigned>(blocks), Cfg::kThreads, kSmemBytes, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace inflight::kernels::cuda::detail
