#include "kernels/cuda/quant_dequantize.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/quant_codes.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per output element, any k and alignment. Grid: (min(ceil(n * k / kThreads), 65536)),
// Block: (kThreads); grid-stride.
template <typename T, QuantWeightKind kKind>
__global__ void DequantizeKernel(T* out, QuantWeight w, std::int64_t n, std::int64_t k) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const std::int64_t total = n * k;
  const std::int64_t row_bytes = kKind == QuantWeightKind::kInt4 ? k / 2 : k;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
       idx < total; idx += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t o = idx / k, i = idx - o * k;
    const std::int64_t g = GroupOf(w, i);
    const std::uint8_t b = w.codes[o * row_bytes + (kKind == QuantWeightKind::kInt4 ? i / 2 : i)];
    const float v = CodeValue<kKind>(b, static_cast<int>(i & 1)) -
                    ZeroPoint<kKind>(w.zeros, o * w.num_groups + g);
    out[idx] = FromFloat<T>(v * ScaleOf(w, o, g));
  }
}

// 8 consecutive elements of one row a thread (one 16-byte store; 4 bytes of int4 codes or 8 of
// int8 / fp8), for k % 8 == 0 and aligned rows. Above 8 rows this pass is half of every weight-only
// linear (the bf16 GEMM on its output is the other), and the scalar kernel above ran it at a
// fifth of the copy rate (inflight-bench-gpu-quant, H200). Grid: (ceil(k / 8 / kThreads),
// min(n, 65535)), Block: (kThreads); a row stride loop covers more rows than the grid's y.
template <typename T, QuantWeightKind kKind>
__global__ void DequantizeVec8Kernel(T* out, QuantWeight w, std::int64_t n, int k) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const int i0 = (blockIdx.x * kThreads + threadIdx.x) * 8;
  if (i0 >= k) return;
  constexpr bool kInt4 = kKind == QuantWeightKind::kInt4;
  const std::int64_t row_bytes = kInt4 ? k / 2 : k;
  for (std::int64_t o = blockIdx.y; o < n; o += gridDim.y) {
    union {
      std::uint64_t bits;
      std::uint32_t half_bits[2];
      std::uint8_t e[8];
    } codes;
    const std::uint8_t* row = w.codes + o * row_bytes;
    if constexpr (kInt4) {
      codes.half_bits[0] = *reinterpret_cast<const std::uint32_t*>(row + i0 / 2);
    } else {
      codes.bits = *reinterpret_cast<const std::uint64_t*>(row + i0);
    }
    Vec8<T> v;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int i = i0 + j;
      const std::int64_t g = GroupOf(w, i);
      const std::uint8_t b = kInt4 ? codes.e[j / 2] : codes.e[j];
      const float c = CodeValue<kKind>(b, i & 1) - ZeroPoint<kKind>(w.zeros, o * w.num_groups + g);
      v.e[j] = FromFloat<T>(c * ScaleOf(w, o, g));
    }
    *reinterpret_cast<uint4*>(out + o * k + i0) = v.bits;
  }
}

// One 16-byte chunk of codes a thread (32 int4 or 16 int8 / fp8 columns of one row, one scale
// group: groups of whole chunks, no g_idx), decoded as the GEMV decodes them (quant_codes.cuh
// Decode8) and written as 16-byte stores: the pass is a copy, 2.5 (int4) or 3 (int8) bytes a
// weight, where the vec8 kernel above spent per element a 64-bit group division and a scale
// load and ran at 1.15 TB/s (8B gate_up int4, 255 us, H200). Grid: (min(ceil(n * chunks /
// kThreads), 65536 * 8)), Block: (kThreads); grid-stride over (row, chunk).
template <typename T, QuantWeightKind kKind>
__global__ void DequantizeChunkKernel(T* out, QuantWeight w, std::int64_t n, int k,
                                      int group_shift) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  constexpr int kCols = kKind == QuantWeightKind::kInt4 ? 32 : 16;
  const int chunks = k / kCols;
  const std::int64_t total = n * chunks;
  const auto* codes = reinterpret_cast<const uint4*>(w.codes);
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
       idx < total; idx += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const std::int64_t o = idx / chunks;
    const int c = static_cast<int>(idx - o * chunks);
    const std::int64_t g = w.per_tensor ? 0 : (c * kCols) >> group_shift;
    const std::int64_t at = o * w.num_groups + g;
    const float s = w.per_tensor ? w.scales[0] : w.scales[at];
    const float zero = ZeroPoint<kKind>(w.zeros, at);
    const uint4 v = codes[idx];
    T* dst = out + o * k + static_cast<std::int64_t>(c) * kCols;
#pragma unroll
    for (int q = 0; q < kCols / 8; ++q) {
      float f[8];
      Decode8<kKind>(v, q, zero, f);
      Vec8<T> e;
#pragma unroll
      for (int j = 0; j < 8; ++j) e.e[j] = FromFloat<T>(f[j] * s);
      reinterpret_cast<uint4*>(dst)[q] = e.bits;
    }
  }
}

template <typename T, QuantWeightKind kKind>
cudaError_t LaunchKind(T* out, const QuantWeight& w, std::int64_t n, std::int64_t k,
                       cudaStream_t stream) {
  // The chunk kernel: whole 16-byte chunks a row, each in one scale group (groups a power of two
  // of at least a chunk's columns, one a row, or per tensor).
  constexpr int kCols = kKind == QuantWeightKind::kInt4 ? 32 : 16;
  const bool pow2_groups = w.group_size >= kCols && (w.group_size & (w.group_size - 1)) == 0;
  if (k % kCols == 0 && k <= (std::int64_t{1} << 30) && w.g_idx == nullptr &&
      (w.per_tensor || w.group_size == 0 || pow2_groups) && Aligned16(out) && Aligned16(w.codes)) {
    int shift = 31;
    if (!w.per_tensor && w.group_size > 0) {
      while ((std::int64_t{1} << shift) > w.group_size) --shift;
    }
    const auto blocks = static_cast<unsigned>(
        std::min<std::int64_t>(CeilDiv(n * (k / kCols), kThreads), std::int64_t{65536} * 8));
    return LaunchProgrammatic(DequantizeChunkKernel<T, kKind>, dim3(blocks), dim3(kThreads), 0,
                              stream, out, w, n, static_cast<int>(k), shift);
  }
  const bool vec8 = k % 8 == 0 && k <= (std::int64_t{1} << 30) && Aligned16(out) &&
                    reinterpret_cast<std::uintptr_t>(w.codes) % 8 == 0;
  if (vec8) {
    const dim3 grid(static_cast<unsigned>(CeilDiv(k / 8, kThreads)),
                    static_cast<unsigned>(std::min<std::int64_t>(n, 65535)));
    return LaunchProgrammatic(DequantizeVec8Kernel<T, kKind>, grid, dim3(kThreads), 0, stream, out,
                              w, n, static_cast<int>(k));
  }
  const auto blocks =
      static_cast<unsigned>(std::min<std::int64_t>(CeilDiv(n * k, kThreads), 65536));
  return LaunchProgrammatic(DequantizeKernel<T, kKind>, dim3(blocks), dim3(kThreads), 0, stream,
                            out, w, n, k);
}

template <typename T>
cudaError_t LaunchTyped(void* out, const QuantWeight& w, std::int64_t n, std::int64_t k,
                        cudaStream_t stream) {
  T* y = static_cast<T*>(out);
  switch (w.kind) {
    case QuantWeightKind::kFp8E4M3:
      return LaunchKind<T, QuantWeightKind::kFp8E4M3>(y, w, n, k, stream);
    case QuantWeightKind::kInt8:
      return LaunchKind<T, QuantWeightKind::kInt8>(y, w, n, k, stream);
    case QuantWeightKind::kInt4:
      return LaunchKind<T, QuantWeightKind::kInt4>(y, w, n, k, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t DequantizeWeight(void* out, DType dtype, const QuantWeight& w, std::int64_t n,
                             std::int64_t k, cudaStream_t stream) {
  if (n <= 0 || k <= 0 || w.codes == nullptr || w.scales == nullptr) return cudaErrorInvalidValue;
  if (w.kind == QuantWeightKind::kInt4 && k % 2 != 0) return cudaErrorInvalidValue;
  INFLIGHT_DISPATCH_HALF(dtype, T, { return LaunchTyped<T>(out, w, n, k, stream); });
  return cudaErrorInvalidValue;
}

}  // namespace inflight::kernels::cuda
