// The quantized GEMV for one input row (batch-1 decode) on packed half math. The general kernel
// (quant_gemv.cu) turns every code and input into fp32 before its FMAs; at one row those
// conversions, not the weight stream, bound it (31-51% of the read rate for fp8 and int8, 17-27%
// for int4 on an H200). Here codes become half2 pairs by integer bit operations (exact: every code
// value, less its zero point, is a small integer or a scaled E4M3 value that fp16 holds), the
// block stages the input row once as fp16 scaled by a power of two to |x| < 1, and each 16-byte
// chunk is summed by HFMA2 (two products an instruction) into one fp16 pair, which goes to the
// fp32 accumulator with the chunk's scale. Error: a chunk's partial sum (at most 16 products a
// half) rounds at fp16's 2^-11, below the output's own rounding in bf16 and near it in fp16.
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
template <QuantWeightKind kKind>
__device__ __forceinline__ void DecodeHalf8(const uint4& v, int q, __half2 sub, __half2 sub_hi,
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

// One warp per output row as the general kernel (rows strided over the grid; lane l reads 16-byte
// chunks l, l + 32, ...; each lane starts its chunk's 8-column runs at a rotation of its lane so
// that a quarter-warp's shared loads hit distinct banks). The block first finds the input row's
// largest magnitude and stages x * 2^-e in fp16 (2^e the power of two just above it), so that a
// pair's products stay within 16 (int4), 255 (int8) or 1.75 (fp8) and a chunk's fp16 sum cannot
// overflow. kPrefetch: each warp's first loads of codes go out before the wait for the previous
// kernel and the staging (codes are constant; only the inputs come from the previous kernel), so
// that their latency overlaps the staging's. Grid: (min(ceil(n / 8), 16 x SMs)), Block: (256),
// shared k * 2 bytes.
template <typename T, QuantWeightKind kKind, bool kPrefetch>
__global__ void __launch_bounds__(kQuantGemvThreads) QuantGemvHalfRowKernel(QuantGemvArgs a) {
  extern __shared__ uint4 sx[];  // [k / 8], pairs as StagePair orders them
  constexpr int kCols = kKind == QuantWeightKind::kInt4 ? 32 : 16;
  constexpr int kQ = kCols / 8;
  constexpr int kRotShift = kQ == 4 ? 1 : 2;
  const std::int64_t k8 = a.k / 8;
  const auto row_of_warp = [] {
    return static_cast<std::int64_t>(blockIdx.x) * kQuantGemvWarps + (threadIdx.x >> 5);
  };
  const auto codes_of_row = [&a](std::int64_t row) {
    const std::int64_t row_bytes = kKind == QuantWeightKind::kInt4 ? a.k / 2 : a.k;
    return reinterpret_cast<const uint4*>(a.w.codes + row * row_bytes);
  };
  uint4 first[kQuantGemvUnroll];
  if constexpr (kPrefetch) {
    if (row_of_warp() < a.n) {
      LoadCodeChunks(codes_of_row(row_of_warp()), threadIdx.x & 31, a.k / kCols, first);
    }
  }
  GridDependencyWait();
  GridDependencyLaunchDependents();
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
  int exponent = 0;  // amax = f * 2^exponent, f in [0.5, 1); 0 for a row of zeros
  frexpf(amax, &exponent);
  const float inv = ldexpf(1.0f, -exponent);  // exact; nonzero for every finite amax
  for (std::int64_t i = threadIdx.x; i < k8; i += kQuantGemvThreads) {
    Vec8<T> v;
    v.bits = x8[i];  // an L1 hit: the pass above read it
    float xs[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) xs[e] = ToFloat(v.e[e]) * inv;
    sx[i] = make_uint4(StagePair<kKind>(xs, 0), StagePair<kKind>(xs, 1), StagePair<kKind>(xs, 2),
                       StagePair<kKind>(xs, 3));
  }
  __syncthreads();

  const QuantWeight& w = a.w;
  const int lane = threadIdx.x & 31;
  const std::int64_t chunks = a.k / kCols;
  const std::int64_t first_row = row_of_warp();
  // fp8 codes were decoded at 2^-8 of their values.
  const float out_scale = kKind == QuantWeightKind::kFp8E4M3 ? 256.0f : 1.0f;
  for (std::int64_t row = first_row; row < a.n;
       row += static_cast<std::int64_t>(gridDim.x) * kQuantGemvWarps) {
    const uint4* w_row = codes_of_row(row);
    float acc = 0.0f;
    for (std::int64_t base = lane; base < chunks; base += 32 * kQuantGemvUnroll) {
      uint4 v[kQuantGemvUnroll];
      if (kPrefetch && row == first_row && base == lane) {
#pragma unroll
        for (int u = 0; u < kQuantGemvUnroll; ++u) v[u] = first[u];
      } else {
        LoadCodeChunks(w_row, base, chunks, v);
      }
#pragma unroll
      for (int u = 0; u < kQuantGemvUnroll; ++u) {
        const std::int64_t c = base + 32 * u;
        if (c >= chunks) break;
        const std::int64_t g = GroupOf(w, c * kCols);
        const float scale = ScaleOf(w, row, g);
        const float zero = ZeroPoint<kKind>(w.zeros, row * w.num_groups + g);
        constexpr float kBase = kKind == QuantWeightKind::kInt8 ? 1152.0f : 1024.0f;
        const __half2 sub = __float2half2_rn(kBase + zero);  // an integer fp16 holds exactly
        const __half2 sub_hi = __float2half2_rn(-(64.0f + zero));
        __half2 part = __float2half2_rn(0.0f);
#pragma unroll
        for (int r = 0; r < kQ; ++r) {
          const int q = (r + (lane >> kRotShift)) & (kQ - 1);
          __half2 wv[4];
          DecodeHalf8<kKind>(v[u], q, sub, sub_hi, wv);
          const uint4 xv = sx[c * kQ + q];
          part = __hfma2(wv[0], AsHalf2(xv.x), part);
          part = __hfma2(wv[1], AsHalf2(xv.y), part);
          part = __hfma2(wv[2], AsHalf2(xv.z), part);
          part = __hfma2(wv[3], AsHalf2(xv.w), part);
        }
        const float2 pf = __half22float2(part);
        acc = fmaf(pf.x + pf.y, scale, acc);
      }
    }
    acc = WarpSum(acc);
    if (lane == 0) {
      float out = ldexpf(acc * out_scale, exponent);
      T* y = static_cast<T*>(a.y);
      if (a.bias != nullptr) out += ToFloat(static_cast<const T*>(a.bias)[row]);
      if (a.accumulate) out += ToFloat(y[row]);
      y[row] = FromFloat<T>(out);
    }
  }
}

}  // namespace

template <typename T, QuantWeightKind kKind>
cudaError_t LaunchQuantGemvHalfRow(const QuantGemvArgs& args, unsigned blocks,
                                   std::size_t shared_bytes, bool prefetch, cudaStream_t stream) {
  return LaunchProgrammatic(
      prefetch ? QuantGemvHalfRowKernel<T, kKind, true> : QuantGemvHalfRowKernel<T, kKind, false>,
      dim3(blocks), dim3(kQuantGemvThreads), shared_bytes, stream, args);
}

template <typename T, QuantWeightKind kKind>
cudaError_t SetQuantGemvHalfRowSharedLimit(int bytes) {
  for (const auto kernel :
       {QuantGemvHalfRowKernel<T, kKind, false>, QuantGemvHalfRowKernel<T, kKind, true>}) {
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

#define INFLIGHT_INSTANTIATE_HALF_ROW(T, KIND)                                           \
  template cudaError_t LaunchQuantGemvHalfRow<T, KIND>(const QuantGemvArgs&, unsigned,   \
                                                       std::size_t, bool, cudaStream_t); \
  template cudaError_t SetQuantGemvHalfRowSharedLimit<T, KIND>(int);
INFLIGHT_INSTANTIATE_HALF_ROW(__half, QuantWeightKind::kFp8E4M3)
INFLIGHT_INSTANTIATE_HALF_ROW(__half, QuantWeightKind::kInt8)
INFLIGHT_INSTANTIATE_HALF_ROW(__half, QuantWeightKind::kInt4)
INFLIGHT_INSTANTIATE_HALF_ROW(__nv_bfloat16, QuantWeightKind::kFp8E4M3)
INFLIGHT_INSTANTIATE_HALF_ROW(__nv_bfloat16, QuantWeightKind::kInt8)
INFLIGHT_INSTANTIATE_HALF_ROW(__nv_bfloat16, QuantWeightKind::kInt4)
#undef INFLIGHT_INSTANTIATE_HALF_ROW

}  // namespace inflight::kernels::cuda
