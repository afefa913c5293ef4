// The weight-only quantized GEMM (quant_gemm_mixed.h): mma.sync m16n8k16 with the weight as the A
// operand (16 output rows an mma) and the tokens as B (8 an mma), so a few tokens still fill the
// tensor cores' larger side. Internal to src/kernels/cuda; instantiated in quant_gemm_mixed_int4.cu
// and quant_gemm_mixed_int8.cu.
//
// Block: 128 output rows x kTokens tokens; a warp takes kTilesPerWarp m16 tiles of rows and every
// token, so each thread dequantizes 2 kTilesPerWarp rows. One tile a warp (8 warps) up to 32
// tokens, where hiding HBM's latency is the job; two (4 warps) at 64, where each input fragment
// read from shared memory then feeds two mmas (H200, 8B gate_up int4: 64 rows 67.1 -> 63.1 us,
// 128 rows 129.9 -> 122.7; at 32 tokens two tiles lost, 41.6 -> 46.0).
// Stages of (codes, inputs) arrive by cp.async, kStages deep; the first stages' codes are
// requested before the PDL wait.
//
// The columns of a k tile are taken in an order that lets each thread fetch both operands with
// 16-byte shared loads and no ldmatrix: lane (g = lane / 4, q = lane % 4) owns the 32 columns
// 32 q .. 32 q + 31 of its rows, and mma step s (0..7) multiplies columns 32 q + 4 s .. + 3 in the
// fragment slots of k = 2 q, 2 q + 1, 2 q + 8, 2 q + 9. A dot product does not care about the
// order of its terms as long as A and B agree, and they do: both come from the same columns. The
// 32 columns of a lane lie in one scale group when groups are multiples of 32 columns.
//
// Dequantizing a pair of int4 codes (low and high nibble of one byte) takes one byte permute and
// one LOP3 to put (M + lo, M + hi) in a half pair (M = 1024 in fp16, 128 in bf16, whose spacing is
// 1 there), one subtraction of (M + zero) (exact), one multiplication by the scale pair.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_attention_context_ptx.cuh"
#include "kernels/cuda/quant_weight.h"

namespace inflight::kernels::cuda {

struct MixedGemmArgs {
  void* y;  // [m, n] in T, row stride y_stride (splits == 1)
  std::int64_t y_stride;
  const void* x;  // [m, k] in T, row stride x_stride
  std::int64_t x_stride;
  QuantWeight w;
  const void* bias;  // [n] in T or null (splits == 1)
  float* partial;    // [splits, m, n] fp32 (splits > 1)
  int m, n, k;
  int k_tiles_per_split;
  // Scale (and zero point) (row, group) at row * scale_row_stride + group: num_groups, or 0 per
  // tensor; a column's group is column >> group_shift (31: one group a row or the tensor).
  int scale_row_stride;
  int group_shift;
  bool accumulate;  // splits == 1
};

constexpr int kMixedRows = 128;  // output rows a block

// A stage holds 128 bytes of codes of each of the block's 128 rows (HBM serves whole 128-byte
// pieces of a row far better than the 64 of 128 int4 columns: int4 at 128 columns a tile ran
// 1.2x slower than int8 at 8B's gate_up, 9 rows, H200) and the inputs of their columns, split in
// sub-tiles of 128 columns: two for int4 (256 columns), one for int8.
template <QuantWeightKind kKind, int kTokens>
struct MixedTiles {
  static constexpr int kSub = kKind == QuantWeightKind::kInt4 ? 2 : 1;
  static constexpr int kTilesPerWarp = kTokens >= 64 ? 2 : 1;
  static constexpr int kThreads = 32 * kMixedRows / (16 * kTilesPerWarp);
  static constexpr int kMinBlocks = 2;      // shared memory allows no more from 32 tokens on
  static constexpr int kCols = 128 * kSub;  // input columns a stage
  static constexpr int kCodeRowBytes = 128;
  static constexpr int kCodeBytes = kMixedRows * kCodeRowBytes;
  static constexpr int kXRowBytes = kCols * 2;
  static constexpr int kXBytes = kTokens * kXRowBytes;
  static constexpr int kStageBytes = kCodeBytes + kXBytes;
  // As many stages (2..6) as two blocks an SM hold: a block's stages ahead are what it has in
  // flight, and few tokens make few blocks (224 at 8B's gate_up), so depth is what keeps HBM
  // busy (int8, 16 tokens, gate_up, H200: 3 stages 58 us, 4 stages 44 us).
  static constexpr int kFit = (110 << 10) / kStageBytes;
  static constexpr int kStages = kFit < 2 ? 2 : (kFit > 6 ? 6 : kFit);
  static constexpr int kSharedBytes = kStages * kStageBytes;
};

namespace mixed {

template <typename T>
struct Half2Of;
template <>
struct Half2Of<__half> {
  using Type = __half2;
  static constexpr std::uint32_t kMagicBits = 0x64006400u;  // (1024, 1024)
  static constexpr float kMagic = 1024.0f;
};
template <>
struct Half2Of<__nv_bfloat16> {
  using Type = __nv_bfloat162;
  static constexpr std::uint32_t kMagicBits = 0x43004300u;  // (128, 128)
  static constexpr float kMagic = 128.0f;
};

template <typename T>
__device__ __forceinline__ std::uint32_t PairBits(typename Half2Of<T>::Type v) {
  return *reinterpret_cast<std::uint32_t*>(&v);
}
template <typename T>
__device__ __forceinline__ typename Half2Of<T>::Type AsPair(std::uint32_t bits) {
  return *reinterpret_cast<typename Half2Of<T>::Type*>(&bits);
}

// (bits - sub) * mul on half pairs.
template <typename T>
__device__ __forceinline__ std::uint32_t SubMul(std::uint32_t bits, std::uint32_t sub,
                                                std::uint32_t mul) {
  return PairBits<T>(__hmul2(__hsub2(AsPair<T>(bits), AsPair<T>(sub)), AsPair<T>(mul)));
}

// Byte kByte of word's two int4 codes as the pair (M + low nibble, M + high nibble); shifted is
// word >> 4, whose byte kByte has the high nibble at the bottom.
template <typename T, int kByte>
__device__ __forceinline__ std::uint32_t Int4PairBits(std::uint32_t word, std::uint32_t shifted) {
  constexpr unsigned kSelect = kByte | (kByte << 4) | ((4 + kByte) << 8) | ((4 + kByte) << 12);
  return (__byte_perm(word, shifted, kSelect) & 0x000F000Fu) | Half2Of<T>::kMagicBits;
}

// fp16: bytes kByte, kByte + 1 of word (two's complement int8 codes c) as the pair 1152 + c
// (c ^ 0x80 = c + 128 unsigned, under 1024's spacing of 1).
template <int kByte>
__device__ __forceinline__ std::uint32_t Int8PairBitsFp16(std::uint32_t word) {
  constexpr unsigned kSelect = kByte | (4 << 4) | ((kByte + 1) << 8) | (4 << 12);
  return (__byte_perm(word, 0u, kSelect) ^ 0x00800080u) | 0x64006400u;
}

// 2^23 + 128 + c as a float from the int8 code c in byte kByte of word (bf16 has no spacing of 1
// up to 1152, so bf16 int8 pairs are made in fp32).
template <int kByte>
__device__ __forceinline__ float Int8MagicFloat(std::uint32_t word_xor80) {
  return __uint_as_float(__byte_perm(word_xor80, 0x4B000000u, 0x7440u | kByte));
}

// A row's scale and zero point for one k tile, in the form the pair math wants: the scale pair
// and the (M + zero) pair in T, or for bf16 int8 the fp32 scale and 2^23 + 128 + zero.
struct RowScale {
  std::uint32_t mul;  // T pair, or fp32 bits
  std::uint32_t sub;  // T pair, or fp32 bits
};

template <typename T, QuantWeightKind kKind>
__device__ __forceinline__ RowScale MakeRowScale(float s, float zero) {
  using H = Half2Of<T>;
  if constexpr (kKind == QuantWeightKind::kInt8 && std::is_same_v<T, __nv_bfloat16>) {
    return {__float_as_uint(s), __float_as_uint(8388608.0f + 128.0f + zero)};
  } else {
    const float base = kKind == QuantWeightKind::kInt8 ? H::kMagic + 128.0f : H::kMagic;
    const T st = FromFloat<T>(s), bt = FromFloat<T>(base + zero);
    typename H::Type mul, sub;
    mul.x = st, mul.y = st, sub.x = bt, sub.y = bt;
    return {PairBits<T>(mul), PairBits<T>(sub)};
  }
}

// Pair kPair of one row's A fragments, dequantized from a code word: int4 byte kPair of the word
// (its low and high nibble: the word's columns 2 kPair, 2 kPair + 1 of 8); int8 bytes 2 kPair and
// 2 kPair + 1 (of the word's 4 columns).
template <typename T, QuantWeightKind kKind, int kPair>
__device__ __forceinline__ std::uint32_t DequantPair(std::uint32_t word, std::uint32_t shifted,
                                                     const RowScale& rs) {
  if constexpr (kKind == QuantWeightKind::kInt4) {
    return SubMul<T>(Int4PairBits<T, kPair>(word, shifted), rs.sub, rs.mul);
  } else if constexpr (std::is_same_v<T, __half>) {
    return SubMul<T>(Int8PairBitsFp16<2 * kPair>(word), rs.sub, rs.mul);
  } else {
    const float base = __uint_as_float(rs.sub), s = __uint_as_float(rs.mul);
    const float lo = (Int8MagicFloat<2 * kPair>(word) - base) * s;
    const float hi = (Int8MagicFloat<2 * kPair + 1>(word) - base) * s;
    return PairBits<T>(__floats2bfloat162_rn(lo, hi));
  }
}

// The physical 16-byte chunk of logical chunk c in a row of the input tile (16 or 32 chunks a
// row): lanes (g, q) of a quarter warp read chunk 16 h + 4 q + t of rows g = 0, 1, which this
// spreads over all eight 16-byte bank groups.
__device__ __forceinline__ int XChunk(int row, int c) {
  return c ^ (((c >> 3) & 1) | ((row & 1) << 1));
}

// The physical 16-byte chunk of logical chunk c in a row of the code tile (8 chunks a row, rows
// 128 bytes apart, so every row starts on the same banks): a quarter warp reads rows g = 0, 1,
// int4 lanes chunk 4 h + q, int8 lanes chunk 2 q + u; odd rows move those to the other banks.
template <bool kInt4>
__device__ __forceinline__ int CodeChunk(int row, int c) {
  return c ^ ((row & 1) << (kInt4 ? 2 : 0));
}

}  // namespace mixed

// Grid: (ceil(m / kTokens), ceil(n / 128), splits), Block: (MixedTiles::kThreads), dynamic shared
// memory MixedTiles::kSharedBytes. Split z takes stages [z * per, (z + 1) * per) of ceil(k / kCols)
// and writes fp32 sums to partial[z] when gridDim.z > 1, else finishes y itself.
template <typename T, QuantWeightKind kKind, int kTokens>
__global__ void __launch_bounds__(MixedTiles<kKind, kTokens>::kThreads,
                                  MixedTiles<kKind, kTokens>::kMinBlocks)
    QuantMixedGemmKernel(MixedGemmArgs args) {
  using Tiles = MixedTiles<kKind, kTokens>;
  using namespace mixed;
  constexpr bool kInt4 = kKind == QuantWeightKind::kInt4;
  constexpr int kSub = Tiles::kSub;
  constexpr int kTokenTiles = kTokens / 8;
  constexpr int kThreads = Tiles::kThreads;
  constexpr int kTiles = Tiles::kTilesPerWarp;
  constexpr int kR = 2 * kTiles;  // rows a thread: rr -> warp rows 16 (rr / 2) + g + 8 (rr % 2)
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int t0 = blockIdx.x * kTokens, n0 = blockIdx.y * kMixedRows;
  const int k_tiles = (args.k + Tiles::kCols - 1) / Tiles::kCols;
  const int kt_begin = blockIdx.z * args.k_tiles_per_split;
  const int kt_end = min(k_tiles, kt_begin + args.k_tiles_per_split);
  const int count = kt_end - kt_begin;
  const QuantWeight& w = args.w;
  const int code_row_bytes = kInt4 ? args.k / 2 : args.k;

  // A cp.async chunk outside the weight, the rows or the columns (the last stage may be half: k a
  // multiple of 128) reads nothing and lands as zeros, whose products are zeros.
  // Thread tid copies chunk tid % 8 of code rows tid / 8 + kThreads / 8 j and chunk tid %
  // kXChunksPerRow of input rows tid / kXChunksPerRow + kXRowsPerPass j: one column and row parity
  // for all j.
  constexpr int kCodeChunks = kMixedRows * 8 / kThreads;
  constexpr int kXChunksPerRow = Tiles::kXRowBytes / 16;
  constexpr int kXRowsPerPass = kThreads / kXChunksPerRow;
  constexpr int kXChunks = kTokens / kXRowsPerPass;
  const int code_r = tid / 8, code_c = tid % 8;
  const int code_src = code_r * code_row_bytes + code_c * 16;
  const int code_dst = code_r * Tiles::kCodeRowBytes + CodeChunk<kInt4>(code_r, code_c) * 16;
  const int code_col = code_c * (kInt4 ? 32 : 16);
  const int x_r = tid / kXChunksPerRow, x_c = tid % kXChunksPerRow;
  const int x_src = (x_r * static_cast<int>(args.x_stride) + x_c * 8) * 2;
  const int x_dst = Tiles::kCodeBytes + x_r * Tiles::kXRowBytes + XChunk(x_r, x_c) * 16;
  const int x_col = x_c * 8;
  const auto* codes0 = w.codes + static_cast<std::int64_t>(n0) * code_row_bytes;
  const auto* x0 =
      reinterpret_cast<const unsigned char*>(static_cast<const T*>(args.x) + t0 * args.x_stride);
  const std::uint32_t smem0 = detail::SharedAddress(smem);
  auto load_codes = [&](int kt, int stage) {
    const std::uint8_t* tile = codes0 + kt * Tiles::kCodeRowBytes + code_src;
    const bool col_ok = code_col < args.k - kt * Tiles::kCols;
    const std::uint32_t base = smem0 + stage * Tiles::kStageBytes + code_dst;
#pragma unroll
    for (int j = 0; j < kCodeChunks; ++j) {
      constexpr int kRowsPerPass = kThreads / 8;
      const bool ok = col_ok && n0 + code_r + kRowsPerPass * j < args.n;
      detail::CpAsync16(base + j * kRowsPerPass * Tiles::kCodeRowBytes,
                        ok ? tile + j * kRowsPerPass * code_row_bytes : w.codes, ok ? 16 : 0);
    }
  };
  auto load_x = [&](int kt, int stage) {
    const unsigned char* tile = x0 + kt * Tiles::kXRowBytes + x_src;
    const bool col_ok = x_col < args.k - kt * Tiles::kCols;
    const std::uint32_t base = smem0 + stage * Tiles::kStageBytes + x_dst;
#pragma unroll
    for (int j = 0; j < kXChunks; ++j) {
      const bool ok = col_ok && t0 + x_r + kXRowsPerPass * j < args.m;
      detail::CpAsync16(base + j * kXRowsPerPass * Tiles::kXRowBytes,
                        ok ? tile + j * kXRowsPerPass * 2 * args.x_stride : x0, ok ? 16 : 0);
    }
  };

  // This thread's rows, clamped inside the weight, as offsets of their first scale group. A lane's
  // group in sub-tile h of stage kt: (kCols kt + 128 h + 32 q) >> shift (shift 31: one group a row;
  // per tensor: every row's offset 0); past the last column (a half last stage) the last group.
  const int warp_row = warp * 16 * kTiles;
  auto row_of = [&](int rr) { return warp_row + 16 * (rr / 2) + g + 8 * (rr % 2); };
  int scale_row[kR];
#pragma unroll
  for (int rr = 0; rr < kR; ++rr) {
    scale_row[rr] = min(n0 + row_of(rr), args.n - 1) * args.scale_row_stride;
  }
  const float implicit_zero = kInt4 ? 8.0f : 0.0f;
  auto group_of = [&](int kt, int h) {
    return (min(kt * Tiles::kCols + 128 * h, args.k - 128) + 32 * q) >> args.group_shift;
  };
  auto load_scales = [&](int group, float(&s)[kR], float(&z)[kR]) {
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const int at = scale_row[r] + group;
      s[r] = __ldg(w.scales + at);
      if (w.zeros == nullptr) {
        z[r] = implicit_zero;
      } else if constexpr (kInt4) {
        z[r] = static_cast<float>(__ldg(w.zeros + at));
      } else {
        z[r] = static_cast<float>(static_cast<std::int8_t>(__ldg(w.zeros + at)));
      }
    }
  };

  GridDependencyLaunchDependents();
#pragma unroll
  for (int s = 0; s < Tiles::kStages - 1; ++s)
    if (s < count) load_codes(kt_begin + s, s);
  GridDependencyWait();
#pragma unroll
  for (int s = 0; s < Tiles::kStages - 1; ++s) {
    if (s < count) load_x(kt_begin + s, s);
    detail::CpAsyncCommit();
  }

  float acc[kTiles][kTokenTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int j = 0; j < kTokenTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // The scales of each sub-tile's group are requested a stage ahead, and only when it changes
  // (every stage for groups of 128 columns or fewer, never for one group a row).
  float s_next[kSub][kR], z_next[kSub][kR];
  int group[kSub], next_group[kSub];
  RowScale rs[kSub][kR];
#pragma unroll
  for (int h = 0; h < kSub; ++h) {
    group[h] = next_group[h] = group_of(kt_begin, h);
    load_scales(group[h], s_next[h], z_next[h]);
  }
  for (int it = 0; it < count; ++it) {
    detail::CpAsyncWait<Tiles::kStages - 2>();
    __syncthreads();
    const int ahead = it + Tiles::kStages - 1;
    if (ahead < count) {
      load_codes(kt_begin + ahead, ahead % Tiles::kStages);
      load_x(kt_begin + ahead, ahead % Tiles::kStages);
    }
    detail::CpAsyncCommit();
#pragma unroll
    for (int h = 0; h < kSub; ++h) {
      if (it == 0 || next_group[h] != group[h]) {
        group[h] = next_group[h];
#pragma unroll
        for (int r = 0; r < kR; ++r) rs[h][r] = MakeRowScale<T, kKind>(s_next[h][r], z_next[h][r]);
      }
      if (it + 1 < count) {
        next_group[h] = group_of(kt_begin + it + 1, h);
        if (next_group[h] != group[h]) load_scales(next_group[h], s_next[h], z_next[h]);
      }
    }

    const unsigned char* stage = smem + (it % Tiles::kStages) * Tiles::kStageBytes;
    const unsigned char* sx = stage + Tiles::kCodeBytes;
#pragma unroll
    for (int h = 0; h < kSub; ++h) {
      // The code words of this thread's rows in sub-tile h: int4 its chunk 4 h + q (word t:
      // columns 128 h + 32 q + 8 t .. + 7, steps 2 t and 2 t + 1); int8 its chunks 2 q, 2 q + 1
      // (word s: step s).
      constexpr int kWords = kInt4 ? 4 : 8;
      std::uint32_t words[kR][kWords];
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const int row = row_of(r);
#pragma unroll
        for (int u = 0; u < kWords / 4; ++u) {
          const int chunk = CodeChunk<kInt4>(row, kInt4 ? 4 * h + q : 2 * q + u);
          const uint4 v =
              *reinterpret_cast<const uint4*>(stage + row * Tiles::kCodeRowBytes + chunk * 16);
          words[r][4 * u] = v.x, words[r][4 * u + 1] = v.y;
          words[r][4 * u + 2] = v.z, words[r][4 * u + 3] = v.w;
        }
        if constexpr (!kInt4 && std::is_same_v<T, __nv_bfloat16>) {
#pragma unroll
          for (int u = 0; u < kWords; ++u) words[r][u] ^= 0x80808080u;
        }
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        // A fragments of m16 tile i, steps 2 t (hb 0) and 2 t + 1 (hb 1): rows 2 i (g) and
        // 2 i + 1 (g + 8) of this thread's.
        std::uint32_t a[kTiles][2][4];
#pragma unroll
        for (int i = 0; i < kTiles; ++i)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int rr = 2 * i + r;
            if constexpr (kInt4) {
              const std::uint32_t word = words[rr][t], shifted = word >> 4;
              a[i][0][r] = DequantPair<T, kKind, 0>(word, shifted, rs[h][rr]);
              a[i][0][2 + r] = DequantPair<T, kKind, 1>(word, shifted, rs[h][rr]);
              a[i][1][r] = DequantPair<T, kKind, 2>(word, shifted, rs[h][rr]);
              a[i][1][2 + r] = DequantPair<T, kKind, 3>(word, shifted, rs[h][rr]);
            } else {
#pragma unroll
              for (int hb = 0; hb < 2; ++hb) {
                const std::uint32_t word = words[rr][2 * t + hb];
                a[i][hb][r] = DequantPair<T, kKind, 0>(word, 0u, rs[h][rr]);
                a[i][hb][2 + r] = DequantPair<T, kKind, 1>(word, 0u, rs[h][rr]);
              }
            }
          }
        const int chunk = 16 * h + 4 * q + t;
#pragma unroll
        for (int j = 0; j < kTokenTiles; ++j) {
          const int row = 8 * j + g;
          const uint4 xv = *reinterpret_cast<const uint4*>(sx + row * Tiles::kXRowBytes +
                                                           XChunk(row, chunk) * 16);
#pragma unroll
          for (int i = 0; i < kTiles; ++i) {
            detail::MmaM16N8K16<T>(acc[i][j], a[i][0], xv.x, xv.y);
            detail::MmaM16N8K16<T>(acc[i][j], a[i][1], xv.z, xv.w);
          }
        }
      }
    }
  }
  detail::CpAsyncWait<0>();  // nothing is in flight at exit

  const T* bias = static_cast<const T*>(args.bias);
  T* y = static_cast<T*>(args.y);
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int j = 0; j < kTokenTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int o = n0 + row_of(2 * i + (e >> 1));
        const int t = t0 + 8 * j + 2 * q + (e & 1);
        if (o >= args.n || t >= args.m) continue;
        float v = acc[i][j][e];
        if (gridDim.z > 1) {
          args.partial[(static_cast<std::int64_t>(blockIdx.z) * args.m + t) * args.n + o] = v;
          continue;
        }
        if (bias != nullptr) v += ToFloat(bias[o]);
        T* out = y + t * args.y_stride + o;
        if (args.accumulate) v += ToFloat(*out);
        *out = FromFloat<T>(v);
      }
}

// Launches the kernel for one (T, kind, token tile); defined in quant_gemm_mixed_int4.cu /
// _int8.cu.
template <typename T, QuantWeightKind kKind, int kTokens>
cudaError_t LaunchQuantMixedGemm(const MixedGemmArgs& args, dim3 grid, cudaStream_t stream);

template <typename T, QuantWeightKind kKind, int kTokens>
cudaError_t SetQuantMixedGemmSharedLimit();

template <typename T, QuantWeightKind kKind, int kTokens>
int QuantMixedGemmBlocksPerSm();

}  // namespace inflight::kernels::cuda
