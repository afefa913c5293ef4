// The quantized GEMV for one input row (batch-1 decode) on packed half math. The general kernel
// (quant_gemv.cu) turns every code and input into fp32 before its FMAs; at one row those
// conversions, not the weight stream, bound it (31-51% of the read rate for fp8 and int8, 17-27%
// for int4 on an H200). Here codes become half2 pairs by integer bit operations (exact: every code
// value, less its zero point, is a small integer or a scaled E4M3 value that fp16 holds), the
// block stages the input row once as fp16 scaled by a power of two to |x| < 1 (FP8 weights: the
// input rounded to E4M3 on the way, so no quantizing pass runs before it), and each 16-byte
// chunk is summed by HFMA2 (two products an instruction) into fp16 pairs, which go to the fp32
// accumulator with the chunk's scale. Each warp keeps its next batch of loads in flight while it
// multiplies the current one. Error: a chunk's partial sums (at most 16 products a half) round at
// fp16's 2^-11, below the output's own rounding in bf16 and near it in fp16.
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/quant_codes.cuh"
#include "kernels/cuda/quant_gemv_kernels.cuh"

namespace inflight::kernels::cuda {
namespace {

__device__ __forceinline__ __half2 AsHalf2(std::uint32_t bits) {
  return *reinterpret_cast<const __half2*>(&bits);
}
__device__ __forceinline__ std::uint32_t Bits(__half2 v) {
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// Two E4M3 codes in bytes 1 and 3 of p (the others zero) as fp16 values 2^-8 times the codes':
// sign to bit 15, exponent and mantissa (7 bits) to bits 7-13. E4M3's exponent bias is 7 and
// fp16's 15, and both have subnormals at the same place (exponent field 0), so every finite code
// maps exactly (checked for all 256). NaN codes (0x7f, 0xff) become 1.875: quantizers saturate.
__device__ __forceinline__ __half2 E4M3PairTimes2PowMinus8(std::uint32_t p) {
  return AsHalf2((p & 0x80008000u) | ((p >> 1) & 0x3f803f80u));
}

// The 8 codes of columns [8 q, 8 q + 8) of a 16-byte chunk as 4 half2 pairs, less the zero
// point, in the order the input row is staged in (StagePair): fp8 and int8 (c0, c1), (c2, c3),
// (c4, c5), (c6, c7); int4 (c0, c4), (c1, c5), (c2, c6), (c3, c7), which the nibble masks give.
//   fp8:  the codes times 2^-8 (the caller's final scale has the 2^8);
//   int8: byte ^ 0x80 = code + 128 as the low mantissa byte of 1024 (0x6400), less 1152 + zero
//         (`sub` holds it twice);
//   int4: a low nibble n as 1024 + n (0x6400 | n), less 1024 + zero (`sub`); a high nibble as
//         1024 + 16 n, times 1/16 less 64 + zero (`sub_hi`).
template <QuantWeightKind kKind, int q>
__device__ __forceinline__ void DecodeHalf8(const uint4& v, __half2 sub, __half2 sub_hi,
                                            __half2 (&out)[4]) {
  if constexpr (kKind == QuantWeightKind::kFp8E4M3) {
    const std::uint32_t lo = Word(v, 2 * q), hi = Word(v, 2 * q + 1);
    out[0] = E4M3PairTimes2PowMinus8(__byte_perm(lo, 0u, 0x1404));
    out[1] = E4M3PairTimes2PowMinus8(__byte_perm(lo, 0u, 0x3424));
    out[2] = E4M3PairTimes2PowMinus8(__byte_perm(hi, 0u, 0x1404));
    out[3] = E4M3PairTimes2PowMinus8(__byte_perm(hi, 0u, 0x3424));
  } else if constexpr (kKind == QuantWeightKind::kInt8) {
    const std::uint32_t lo = Word(v, 2 * q) ^ 0x80808080u, hi = Word(v, 2 * q + 1) ^ 0x80808080u;
    out[0] = __hsub2(AsHalf2(__byte_perm(lo, 0x64646464u, 0x4140)), sub);
    out[1] = __hsub2(AsHalf2(__byte_perm(lo, 0x64646464u, 0x4342)), sub);
    out[2] = __hsub2(AsHalf2(__byte_perm(hi, 0x64646464u, 0x4140)), sub);
    out[3] = __hsub2(AsHalf2(__byte_perm(hi, 0x64646464u, 0x4342)), sub);
  } else {
    const std::uint32_t word = Word(v, q), shifted = word >> 8;
    const __half2 sixteenth = __float2half2_rn(1.0f / 16.0f);
    out[0] = __hsub2(AsHalf2((word & 0x000f000fu) | 0x64006400u), sub);
    out[1] = __hfma2(AsHalf2((word & 0x00f000f0u) | 0x64006400u), sixteenth, sub_hi);
    out[2] = __hsub2(AsHalf2((shifted & 0x000f000fu) | 0x64006400u), sub);
    out[3] = __hfma2(AsHalf2((shifted & 0x00f000f0u) | 0x64006400u), sixteenth, sub_hi);
  }
}

// Staged position of input column 8 g + e within its group of 8, as DecodeHalf8 pairs the codes:
// pair j holds (x[2j], x[2j+1]), or (x[j], x[j+4]) for int4.
template <QuantWeightKind kKind>
__device__ __forceinline__ std::uint32_t StagePair(const float (&x)[8], int j) {
  const __half2 v = kKind == QuantWeightKind::kInt4 ? __floats2half2_rn(x[j], x[j + 4])
                                                    : __floats2half2_rn(x[2 * j], x[2 * j + 1]);
  return Bits(v);
}

// A chunk's runs of 8 columns (one staged uint4 each).
template <QuantWeightKind kKind>
constexpr int kChunkRuns = kQuantChunkCols<kKind> / 8;

// The staged row's slot of chunk c's run q: q XOR bits of c, so that the 8 lanes of a
// quarter-warp, which read the same run q of 8 consecutive chunks, hit 8 distinct 16-byte bank
// groups (unswizzled, chunks 32 or 64 bytes apart would share banks 2 or 4 ways). Lane l only reads
// chunks c = l (mod 32), so its XOR is a constant of the lane (SwizzleOf(l)).
template <QuantWeightKind kKind>
__device__ __forceinline__ int SwizzleOf(int c) {
  return (c >> (kChunkRuns<kKind> == 4 ? 1 : 2)) & (kChunkRuns<kKind> - 1);
}
template <QuantWeightKind kKind>
__device__ __forceinline__ int StagedSlot(int c, int q) {
  return c * kChunkRuns<kKind> + (q ^ SwizzleOf<kKind>(c));
}

// Stages the input row into sx as x * 2^-e in fp16 pairs (StagePair's order, StagedSlot's
// places), 2^e the power of two just above the row's largest magnitude, and returns e: a pair's
// products then stay within 16 (int4), 255 (int8) or 1.75 (fp8), so a chunk's fp16 sums cannot
// overflow. FP8 weights: each input is first rounded as the FP8 linear's activations are
// (w.input_scale, or the row's amax / 448), so the caller's row stays as it is and no quantizing
// pass runs before the GEMV. Rounding is monotonic in |x|, so the rounded row's largest magnitude
// is the rounded amax.
template <typename T, QuantWeightKind kKind>
__device__ __forceinline__ int StageInputRow(const QuantGemvArgs& a, uint4* sx) {
  const std::int64_t k8 = a.k / 8;
  const auto* x8 = static_cast<const uint4*>(a.x);
  float amax = 0.0f;
  for (std::int64_t i = threadIdx.x; i < k8; i += kQuantGemvThreads) {
    Vec8<T> v;
    v.bits = x8[i];
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(ToFloat(v.e[e])));
  }
  // The block's largest magnitude, with the staging buffer's first 8 floats as the warps' scratch
  // (k >= 16): a static scratch would take from the dynamic shared memory the launch may use.
  {
    auto* scratch = reinterpret_cast<float*>(sx);
    amax = WarpMax(amax);
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = amax;
    __syncthreads();
    amax = WarpMax((threadIdx.x & 31) < kQuantGemvWarps ? scratch[threadIdx.x & 31] : 0.0f);
    __syncthreads();  // before the staging below overwrites the scratch
  }
  constexpr bool kRoundFp8 = kKind == QuantWeightKind::kFp8E4M3;
  const float s = kRoundFp8 ? ActivationFp8Scale(a.w.input_scale, amax) : 1.0f;
  if (kRoundFp8) amax = RoundedActivationFp8<T>(amax, s);
  int exponent = 0;  // amax = f * 2^exponent, f in [0.5, 1); 0 for a row of zeros
  frexpf(amax, &exponent);
  const float inv = ldexpf(1.0f, -exponent);  // exact; nonzero for every finite amax
  for (std::int64_t i = threadIdx.x; i < k8; i += kQuantGemvThreads) {
    Vec8<T> v;
    v.bits = x8[i];  // an L1 hit: the pass above read it
    float xs[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float x = ToFloat(v.e[e]);
      xs[e] = (kRoundFp8 ? RoundedActivationFp8<T>(x, s) : x) * inv;
    }
    const int run = static_cast<int>(i);
    sx[StagedSlot<kKind>(run / kChunkRuns<kKind>, run % kChunkRuns<kKind>)] =
        make_uint4(StagePair<kKind>(xs, 0), StagePair<kKind>(xs, 1), StagePair<kKind>(xs, 2),
                   StagePair<kKind>(xs, 3));
  }
  __syncthreads();
  return exponent;
}

// Blocks an SM the kernel is compiled for (__launch_bounds__): 2 leaves ptxas up to 128
// registers, and measured best on an H200 (8B shapes at one row; 4 forces 64 registers and int4
// spills, 3 forces 80): gate_up int4 29.9 us against 29.2 (3) and 32.2 (4), down fp8 20.9 against
// 28.3 and 22.9 (bench/results/2026-11-30-h200-gemv-pipelined.md).
constexpr int kQuantGemvHalfRowMinBlocks = 2;

// What a lane loads for one batch of a weight row: kQuantGemvUnroll 16-byte chunks of codes with
// their scales and zero-point bytes (zero codes and scales past the row's end). The zero point
// stays a byte until the multiply: converting it where it is loaded would wait for the load.
struct HalfRowBatch {
  uint4 codes[kQuantGemvUnroll];
  float scale[kQuantGemvUnroll];
  std::uint32_t zero[kQuantGemvUnroll];
};

// The implicit zero point's byte: 8 for int4, 0 for int8 (fp8 has none).
template <QuantWeightKind kKind>
constexpr std::uint32_t kImplicitZeroByte = kKind == QuantWeightKind::kInt4 ? 8u : 0u;

// DecodeHalf8's `sub` and `sub_hi` of a zero-point byte, by integer operations: int4 zero z
// (0..16): 1024 + z is fp16 0x6400 + z, and -(64 + z) is 0xd400 + 16 z (64's ulp is 1/16);
// int8 zero byte b (two's complement z): 1152 + z = 1024 + (b ^ 0x80), fp16 0x6400 + (b ^ 0x80).
template <QuantWeightKind kKind>
__device__ __forceinline__ void SubsOfZero(std::uint32_t zero, __half2& sub, __half2& sub_hi) {
  const std::uint32_t lo =
      kKind == QuantWeightKind::kInt8 ? 0x6400u + (zero ^ 0x80u) : 0x6400u + zero;
  sub = AsHalf2(lo * 0x00010001u);
  sub_hi = AsHalf2((0xd400u + (zero << 4)) * 0x00010001u);
}

// The launch's condition is one scale group per chunk (no g_idx; per tensor, one group a row, or
// group_size a multiple of the chunk's columns), so chunk c's group is c / (chunks a group):
// c >> shift where that is a power of two (every published group size; 31 for one group), else a
// division by `per_group`.
struct ChunkGroups {
  int shift;
  int per_group;
  __device__ __forceinline__ int Of(int c) const { return shift >= 0 ? c >> shift : c / per_group; }
};

template <QuantWeightKind kKind>
__device__ __forceinline__ ChunkGroups ChunkGroupsOf(const QuantWeight& w) {
  constexpr int kCols = kQuantChunkCols<kKind>;
  if (w.per_tensor || w.group_size <= 0) return {31, 1};
  const int per_group = static_cast<int>(w.group_size / kCols);
  return {(per_group & (per_group - 1)) == 0 ? __ffs(per_group) - 1 : -1, per_group};
}

// Lane's chunks batch + lane + 32 u of `row`; kFull: the batch lies inside the row (no checks).
// The row's pointers are recomputed each batch: kept across batches they would cost registers.
template <QuantWeightKind kKind, bool kFull>
__device__ __forceinline__ void LoadBatch(const QuantWeight& w, int row, int k, int batch, int lane,
                                          ChunkGroups groups, HalfRowBatch& b) {
  constexpr int kCols = kQuantChunkCols<kKind>;
  const int chunks = k / kCols;
  const std::int64_t row_bytes = kKind == QuantWeightKind::kInt4 ? k / 2 : k;
  const std::int64_t groups_before = static_cast<std::int64_t>(row) * w.num_groups;
  const auto* codes = reinterpret_cast<const uint4*>(w.codes + row * row_bytes);
  const float* scales = w.per_tensor ? w.scales : w.scales + groups_before;
  const std::uint8_t* zeros = w.zeros != nullptr ? w.zeros + groups_before : nullptr;
#pragma unroll
  for (int u = 0; u < kQuantGemvUnroll; ++u) {
    const int c = batch + lane + 32 * u;
    const bool in = kFull || c < chunks;
    b.codes[u] = in ? LoadCodesStreaming(codes + c) : make_uint4(0, 0, 0, 0);
    const int g = in ? groups.Of(c) : 0;
    b.scale[u] = in ? scales[g] : 0.0f;
    b.zero[u] = zeros != nullptr ? zeros[g] : kImplicitZeroByte<kKind>;
  }
}

// LoadBatch of whichever kind the batch at `batch` is.
template <QuantWeightKind kKind>
__device__ __forceinline__ void LoadAnyBatch(const QuantWeight& w, int row, int k, int batch,
                                             int lane, ChunkGroups groups, HalfRowBatch& b) {
  if (batch + 32 * kQuantGemvUnroll <= k / kQuantChunkCols<kKind>) {
    LoadBatch<kKind, true>(w, row, k, batch, lane, groups, b);
  } else {
    LoadBatch<kKind, false>(w, row, k, batch, lane, groups, b);
  }
}

// Lane's share of sum_i x[i] w(row, i) over one batch: each chunk's products summed in fp16 pairs
// (two chains, so that consecutive HFMA2s do not wait on each other), then scaled into fp32.
template <QuantWeightKind kKind, bool kFull>
__device__ __forceinline__ float BatchDot(const HalfRowBatch& b, const uint4* sx, int batch,
                                          int lane, int chunks) {
  constexpr int kQ = kChunkRuns<kKind>;
  const int swizzle = SwizzleOf<kKind>(lane);
  float acc = 0.0f;
#pragma unroll
  for (int u = 0; u < kQuantGemvUnroll; ++u) {
    const int c = batch + lane + 32 * u;
    if (!kFull && c >= chunks) break;
    __half2 sub = AsHalf2(0u), sub_hi = sub;
    if constexpr (kKind != QuantWeightKind::kFp8E4M3) SubsOfZero<kKind>(b.zero[u], sub, sub_hi);
    __half2 part0 = AsHalf2(0u), part1 = part0;
    const uint4* runs = sx + c * kQ;
    const auto run = [&](auto q) {
      __half2 wv[4];
      DecodeHalf8<kKind, decltype(q)::value>(b.codes[u], sub, sub_hi, wv);
      const uint4 xv = runs[decltype(q)::value ^ swizzle];
      part0 = __hfma2(wv[0], AsHalf2(xv.x), part0);
      part1 = __hfma2(wv[1], AsHalf2(xv.y), part1);
      part0 = __hfma2(wv[2], AsHalf2(xv.z), part0);
      part1 = __hfma2(wv[3], AsHalf2(xv.w), part1);
    };
    run(std::integral_constant<int, 0>{});
    run(std::integral_constant<int, 1>{});
    if constexpr (kQ == 4) {
      run(std::integral_constant<int, 2>{});
      run(std::integral_constant<int, 3>{});
    }
    const float2 pf = __half22float2(__hadd2(part0, part1));
    acc = fmaf(pf.x + pf.y, b.scale[u], acc);
  }
  return acc;
}

// One warp per output row at a time, rows strided over the grid. A warp walks its rows in batches
// of 32 x kQuantGemvUnroll chunks (lane l reads chunks l, l + 32, ... of the batch) and issues the
// next batch's loads (the rest of this row, or its next row's start) before it multiplies the
// current one, so its loads stay in flight while it computes; the grid is what stays resident
// (rows loop), and the first batch goes out before the wait for the previous kernel, since codes
// and scales are constants (with PDL it overlaps that kernel's tail and this one's staging).
// The staged row is swizzled (StagedSlot) so that a quarter-warp's shared loads hit distinct
// banks with every code index a constant. Indices are 32-bit: n and k are below 2^31 (the
// launcher's condition). Grid: (<= ceil(n / 8)), Block: (256), shared k * 2 bytes.
template <typename T, QuantWeightKind kKind>
__global__ void __launch_bounds__(kQuantGemvThreads, kQuantGemvHalfRowMinBlocks)
    QuantGemvHalfRowKernel(QuantGemvArgs a) {
  extern __shared__ uint4 sx[];  // [k / 8], pairs as StagePair orders them
  constexpr int kCols = kQuantChunkCols<kKind>;
  constexpr int kBatch = 32 * kQuantGemvUnroll;
  const int lane = threadIdx.x & 31;
  const int n = static_cast<int>(a.n), k = static_cast<int>(a.k), chunks = k / kCols;
  const int row_step = static_cast<int>(gridDim.x) * kQuantGemvWarps;
  const ChunkGroups groups = ChunkGroupsOf<kKind>(a.w);
  int row = static_cast<int>(blockIdx.x) * kQuantGemvWarps + (threadIdx.x >> 5);
  int batch = 0;
  HalfRowBatch cur;
  if (row < n) LoadAnyBatch<kKind>(a.w, row, k, 0, lane, groups, cur);
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const int exponent = StageInputRow<T, kKind>(a, sx);
  // fp8 codes were decoded at 2^-8 of their values.
  const float out_scale = kKind == QuantWeightKind::kFp8E4M3 ? 256.0f : 1.0f;
  float acc = 0.0f;
  while (row < n) {
    int next_row = row, next_batch = batch + kBatch;
    if (next_batch >= chunks) next_row += row_step, next_batch = 0;
    HalfRowBatch next;
    if (next_row < n) LoadAnyBatch<kKind>(a.w, next_row, k, next_batch, lane, groups, next);
    acc += batch + kBatch <= chunks ? BatchDot<kKind, true>(cur, sx, batch, lane, chunks)
                                    : BatchDot<kKind, false>(cur, sx, batch, lane, chunks);
    if (next_row != row) {
      acc = WarpSum(acc);
      if (lane == 0) {
        float out = ldexpf(acc * out_scale, exponent);
        T* y = static_cast<T*>(a.y);
        if (a.bias != nullptr) out += ToFloat(static_cast<const T*>(a.bias)[row]);
        if (a.accumulate) out += ToFloat(y[row]);
        y[row] = FromFloat<T>(out);
      }
      acc = 0.0f;
    }
    row = next_row;
    batch = next_batch;
    cur = next;
  }
}

}  // namespace

template <typename T, QuantWeightKind kKind>
cudaError_t LaunchQuantGemvHalfRow(const QuantGemvArgs& args, unsigned blocks,
                                   std::size_t shared_bytes, cudaStream_t stream) {
  return LaunchProgrammatic(QuantGemvHalfRowKernel<T, kKind>, dim3(blocks), dim3(kQuantGemvThreads),
                            shared_bytes, stream, args);
}

template <typename T, QuantWeightKind kKind>
int QuantGemvHalfRowBlocksPerSm(std::size_t shared_bytes) {
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, QuantGemvHalfRowKernel<T, kKind>,
                                                    kQuantGemvThreads,
                                                    shared_bytes) != cudaSuccess) {
    cudaGetLastError();
    return 1;
  }
  return blocks > 0 ? blocks : 1;
}

template <typename T, QuantWeightKind kKind>
cudaError_t SetQuantGemvHalfRowSharedLimit(int bytes) {
  return cudaFuncSetAttribute(QuantGemvHalfRowKernel<T, kKind>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

#define INFLIGHT_INSTANTIATE_HALF_ROW(T, KIND)                                         \
  template cudaError_t LaunchQuantGemvHalfRow<T, KIND>(const QuantGemvArgs&, unsigned, \
                                                       std::size_t, cudaStream_t);     \
  template int QuantGemvHalfRowBlocksPerSm<T, KIND>(std::size_t);                      \
  template cudaError_t SetQuantGemvHalfRowSharedLimit<T, KIND>(int);
INFLIGHT_INSTANTIATE_HALF_ROW(__half, QuantWeightKind::kFp8E4M3)
INFLIGHT_INSTANTIATE_HALF_ROW(__half, QuantWeightKind::kInt8)
INFLIGHT_INSTANTIATE_HALF_ROW(__half, QuantWeightKind::kInt4)
INFLIGHT_INSTANTIATE_HALF_ROW(__nv_bfloat16, QuantWeightKind::kFp8E4M3)
INFLIGHT_INSTANTIATE_HALF_ROW(__nv_bfloat16, QuantWeightKind::kInt8)
INFLIGHT_INSTANTIATE_HALF_ROW(__nv_bfloat16, QuantWeightKind::kInt4)
#undef INFLIGHT_INSTANTIATE_HALF_ROW

}  // namespace inflight::kernels::cuda
