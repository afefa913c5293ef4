// What the quantized GEMV's two kernels share: their arguments, launch shape and weight loads
// (quant_gemv.cu: any row count, fp32 math; quant_gemv_half.cu: one row, packed half math).
// Internal to src/kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/quant_linear_path.h"
#include "kernels/cuda/quant_weight.h"

namespace inflight::kernels::cuda {

constexpr int kQuantGemvThreads = 256;
constexpr int kQuantGemvWarps = kQuantGemvThreads / 32;
// 16-byte code loads a lane issues together: 4 x 16 B x 32 lanes x 8 warps = 16 KiB per block
// (the one-row kernel keeps two such batches in flight), with several blocks per SM (the float
// GEMV keeps 32 KiB, but each of its bytes is half a weight).
constexpr int kQuantGemvUnroll = 4;

// Input columns one 16-byte chunk of codes covers (QuantColumnsPerChunk), as a constant kernels
// can use.
template <QuantWeightKind kKind>
constexpr int kQuantChunkCols = static_cast<int>(QuantColumnsPerChunk(kKind));

struct QuantGemvArgs {
  void* y;
  std::int64_t y_stride;
  const void* x;
  std::int64_t x_stride;
  QuantWeight w;
  const void* bias;
  std::int64_t m, n, k;
  bool accumulate;
};

// Codes are read once per call: kept out of L1 so that the staged inputs' lines stay.
__device__ __forceinline__ uint4 LoadCodesStreaming(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// The one-row kernel of quant_gemv_half.cu (for T = __half, __nv_bfloat16 and every kind): block
// (kQuantGemvThreads), shared memory k * 2 bytes; any grid (rows loop in each warp: the launcher
// sizes it to what stays resident, QuantGemvHalfRowBlocksPerSm); needs one scale group per 16-byte
// chunk (no g_idx; group_size 0 or a multiple of the chunk's columns, or per tensor). FP8 weights:
// x as the caller has it (the kernel rounds it as QuantizeActivationsFp8 would).
template <typename T, QuantWeightKind kKind>
cudaError_t LaunchQuantGemvHalfRow(const QuantGemvArgs& args, unsigned blocks,
                                   std::size_t shared_bytes, cudaStream_t stream);
// Its resident blocks an SM at shared_bytes (1 when the runtime cannot tell).
template <typename T, QuantWeightKind kKind>
int QuantGemvHalfRowBlocksPerSm(std::size_t shared_bytes);
template <typename T, QuantWeightKind kKind>
cudaError_t SetQuantGemvHalfRowSharedLimit(int bytes);

}  // namespace inflight::kernels::cuda
