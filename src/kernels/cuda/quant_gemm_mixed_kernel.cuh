// The weight-only quantized GEMM (quant_gemm_mixed.h): mma.sync m16n8k16 with the weight as the A
// operand (16 output rows an mma) and the tokens as B (8 an mma), so a few tokens still fill the
// tensor cores' larger side. Internal to src/kernels/cuda; instantiated in quant_gemm_mixed_int4.cu
// and quant_gemm_mixed_int8.cu.
//
// Block: 8 warps over 128 output rows x kTokens tokens. Warp w takes rows 32 (w % 4) .. + 31 (two
// m16 tiles) and half of each 128-column k tile (w / 4), so a tile's mmas are spread over twice the
// warps; the halves are summed through shared memory at the end. Stages of (codes, inputs) arrive
// by cp.async, kStages deep; the first stages' codes are requested before the PDL wait.
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
  bool accumulate;  // splits == 1
};

constexpr int kMixedThreads = 256;
constexpr int kMixedRows = 128;   // output rows a block
constexpr int kMixedKTile = 128;  // input columns a stage

template <QuantWeightKind kKind, int kTokens>
struct MixedTiles {
  static constexpr int kCodeRowBytes = kKind == QuantWeightKind::kInt4 ? 64 : 128;
  static constexpr int kCodeBytes = kMixedRows * kCodeRowBytes;
  static constexpr int kXBytes = kTokens * kMixedKTile * 2;
  static constexpr int kStages = kTokens >= 64 ? 3 : 4;
  static constexpr int kStageBytes = kCodeBytes + kXBytes;
  static constexpr int kReduceBytes = 4 * 32 * kTokens * 4;  // the second k half's sums
  static constexpr int kSharedBytes =
      kStages * kStageBytes > kReduceBytes ? kStages * kStageBytes : kReduceBytes;
  static constexpr int kMinBlocks = kTokens >= 64 ? 1 : 2;
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

// The A fragment pair of step half hb (0: columns 4 s, +1; 1: 4 s + 2, +3 once doubled below) for
// one row, from the row's code word of the step: int4 bytes 2 hb (columns 0, 1) and 2 hb + 1
// (columns 2, 3) of word; int8 the word's bytes 0, 1 and 2, 3.
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

// The physical 16-byte chunk of logical chunk c in a row of the input tile (16 chunks a row):
// lanes (g, q) of a quarter warp read chunk 4 q + t of rows g = 0, 1, which this spreads over all
// eight 16-byte bank groups.
__device__ __forceinline__ int XChunk(int row, int c) {
  return c ^ (((c >> 3) & 1) | ((row & 1) << 1));
}

// int8 codes: 8 chunks a row, lanes read chunk 2 q + h of rows g = 0, 1.
__device__ __forceinline__ int CodeChunk8(int row, int c) {
  return c ^ (row & 1);
}

}  // namespace mixed

// Grid: (ceil(m / kTokens), ceil(n / 128), splits), Block: (256), dynamic shared memory
// MixedTiles::kSharedBytes. Split z takes k tiles [z * per, (z + 1) * per) and writes fp32 sums to
// partial[z] when gridDim.z > 1, else finishes y itself.
template <typename T, QuantWeightKind kKind, int kTokens>
__global__ void __launch_bounds__(kMixedThreads, (MixedTiles<kKind, kTokens>::kMinBlocks))
    QuantMixedGemmKernel(MixedGemmArgs args) {
  using Tiles = MixedTiles<kKind, kTokens>;
  using namespace mixed;
  constexpr bool kInt4 = kKind == QuantWeightKind::kInt4;
  constexpr int kTokenTiles = kTokens / 8;
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int rw = warp & 3, kh = warp >> 2;
  const int t0 = blockIdx.x * kTokens, n0 = blockIdx.y * kMixedRows;
  const int k_tiles = args.k / kMixedKTile;
  const int kt_begin = blockIdx.z * args.k_tiles_per_split;
  const int kt_end = min(k_tiles, kt_begin + args.k_tiles_per_split);
  const int count = kt_end - kt_begin;
  const QuantWeight& w = args.w;
  const std::int64_t code_row_bytes = kInt4 ? args.k / 2 : args.k;

  auto load_codes = [&](int kt, int stage) {
    const std::uint32_t base = detail::SharedAddress(smem + stage * Tiles::kStageBytes);
    constexpr int kChunksPerRow = Tiles::kCodeRowBytes / 16;
#pragma unroll
    for (int i = tid; i < kMixedRows * kChunksPerRow; i += kMixedThreads) {
      const int r = i / kChunksPerRow, c = i % kChunksPerRow;
      const int phys = kInt4 ? c : CodeChunk8(r, c);
      const bool valid = n0 + r < args.n;
      const std::uint8_t* src =
          valid ? w.codes + (n0 + r) * code_row_bytes + kt * Tiles::kCodeRowBytes + c * 16
                : w.codes;
      detail::CpAsync16(base + r * Tiles::kCodeRowBytes + phys * 16, src, valid ? 16 : 0);
    }
  };
  auto load_x = [&](int kt, int stage) {
    const std::uint32_t base =
        detail::SharedAddress(smem + stage * Tiles::kStageBytes + Tiles::kCodeBytes);
    const auto* x = static_cast<const T*>(args.x);
#pragma unroll
    for (int i = tid; i < kTokens * 16; i += kMixedThreads) {
      const int r = i / 16, c = i % 16;
      const bool valid = t0 + r < args.m;
      const T* src = valid ? x + (t0 + r) * args.x_stride + kt * kMixedKTile + c * 8 : x;
      detail::CpAsync16(base + r * (kMixedKTile * 2) + XChunk(r, c) * 16, src, valid ? 16 : 0);
    }
  };

  // This thread's four rows (m16 tile i, half r: g or g + 8), clamped inside the weight.
  int rows[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int r = 0; r < 2; ++r) rows[i][r] = min(n0 + rw * 32 + i * 16 + g + 8 * r, args.n - 1);
  const float implicit_zero = kInt4 ? 8.0f : 0.0f;
  auto load_scales = [&](int kt, float (&s)[2][2], float (&z)[2][2]) {
    const int group =
        w.per_tensor || w.group_size == 0 ? 0 : (kt * kMixedKTile + 32 * q) / w.group_size;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const std::int64_t at = static_cast<std::int64_t>(rows[i][r]) * w.num_groups + group;
        s[i][r] = w.per_tensor ? __ldg(w.scales) : __ldg(w.scales + at);
        if (w.zeros == nullptr) {
          z[i][r] = implicit_zero;
        } else if constexpr (kInt4) {
          z[i][r] = static_cast<float>(__ldg(w.zeros + at));
        } else {
          z[i][r] = static_cast<float>(static_cast<std::int8_t>(__ldg(w.zeros + at)));
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

  float acc[2][kTokenTiles][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < kTokenTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  float s_next[2][2], z_next[2][2];
  if (count > 0) load_scales(kt_begin, s_next, z_next);
  for (int it = 0; it < count; ++it) {
    detail::CpAsyncWait<Tiles::kStages - 2>();
    __syncthreads();
    const int ahead = it + Tiles::kStages - 1;
    if (ahead < count) {
      load_codes(kt_begin + ahead, ahead % Tiles::kStages);
      load_x(kt_begin + ahead, ahead % Tiles::kStages);
    }
    detail::CpAsyncCommit();
    RowScale rs[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) rs[i][r] = MakeRowScale<T, kKind>(s_next[i][r], z_next[i][r]);
    if (it + 1 < count) load_scales(kt_begin + it + 1, s_next, z_next);

    const unsigned char* stage = smem + (it % Tiles::kStages) * Tiles::kStageBytes;
    const unsigned char* sx = stage + Tiles::kCodeBytes;
    // This warp's code words: int4 the 8 bytes of words 2 kh, 2 kh + 1 of its 16-byte chunk (the
    // columns of steps 4 kh .. 4 kh + 3); int8 its chunk 2 q + kh (16 bytes, one word a step).
    std::uint32_t words[2][2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = rw * 32 + i * 16 + g + 8 * r;
        if constexpr (kInt4) {
          const uint2 v =
              *reinterpret_cast<const uint2*>(stage + row * Tiles::kCodeRowBytes + q * 16 + kh * 8);
          words[i][r][0] = v.x, words[i][r][1] = v.y;
        } else {
          const uint4 v = *reinterpret_cast<const uint4*>(stage + row * Tiles::kCodeRowBytes +
                                                          CodeChunk8(row, 2 * q + kh) * 16);
          words[i][r][0] = v.x, words[i][r][1] = v.y, words[i][r][2] = v.z, words[i][r][3] = v.w;
          if constexpr (std::is_same_v<T, __nv_bfloat16>) {
#pragma unroll
            for (int u = 0; u < 4; ++u) words[i][r][u] ^= 0x80808080u;
          }
        }
      }
#pragma unroll
    for (int tl = 0; tl < 2; ++tl) {
      // A fragments of steps 2 tl (hb 0) and 2 tl + 1 (hb 1) of this warp's half.
      std::uint32_t a[2][2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if constexpr (kInt4) {
            const std::uint32_t word = words[i][r][tl], shifted = word >> 4;
            a[i][0][r] = DequantPair<T, kKind, 0>(word, shifted, rs[i][r]);
            a[i][0][2 + r] = DequantPair<T, kKind, 1>(word, shifted, rs[i][r]);
            a[i][1][r] = DequantPair<T, kKind, 2>(word, shifted, rs[i][r]);
            a[i][1][2 + r] = DequantPair<T, kKind, 3>(word, shifted, rs[i][r]);
          } else {
#pragma unroll
            for (int hb = 0; hb < 2; ++hb) {
              const std::uint32_t word = words[i][r][2 * tl + hb];
              a[i][hb][r] = DequantPair<T, kKind, 0>(word, 0u, rs[i][r]);
              a[i][hb][2 + r] = DequantPair<T, kKind, 1>(word, 0u, rs[i][r]);
            }
          }
        }
      const int chunk = 4 * q + 2 * kh + tl;
#pragma unroll
      for (int j = 0; j < kTokenTiles; ++j) {
        const int row = 8 * j + g;
        const uint4 xv = *reinterpret_cast<const uint4*>(sx + row * (kMixedKTile * 2) +
                                                         XChunk(row, chunk) * 16);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          detail::MmaM16N8K16<T>(acc[i][j], a[i][0], xv.x, xv.y);
          detail::MmaM16N8K16<T>(acc[i][j], a[i][1], xv.z, xv.w);
        }
      }
    }
  }

  // The second k half's sums to the first through shared memory (the stages are free once every
  // cp.async has landed and every warp is past its last tile).
  detail::CpAsyncWait<0>();
  __syncthreads();
  auto* red = reinterpret_cast<float*>(smem);
  const int slot = rw * 32 + lane;
  if (kh == 1) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < kTokenTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[((i * kTokenTiles + j) * 4 + e) * 128 + slot] = acc[i][j][e];
  }
  __syncthreads();
  if (kh == 1) return;
  const T* bias = static_cast<const T*>(args.bias);
  T* y = static_cast<T*>(args.y);
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < kTokenTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int o = n0 + rw * 32 + i * 16 + g + 8 * (e >> 1);
        const int t = t0 + 8 * j + 2 * q + (e & 1);
        if (o >= args.n || t >= args.m) continue;
        float v = acc[i][j][e] + red[((i * kTokenTiles + j) * 4 + e) * 128 + slot];
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

// Launches the kernel for one (T, kind, token tile); defined in quant_gemm_mixed_int4.cu / _int8.cu.
template <typename T, QuantWeightKind kKind, int kTokens>
cudaError_t LaunchQuantMixedGemm(const MixedGemmArgs& args, dim3 grid, cudaStream_t stream);

template <typename T, QuantWeightKind kKind, int kTokens>
cudaError_t SetQuantMixedGemmSharedLimit();

template <typename T, QuantWeightKind kKind, int kTokens>
int QuantMixedGemmBlocksPerSm();

}  // namespace inflight::kernels::cuda
