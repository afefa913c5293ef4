#include "kernels/cuda/amax.h"

#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Grid: (min(rows, 1024)), Block: (kThreads); rows grid-strided, columns block-strided.
template <typename T>
__global__ void FoldAbsMaxKernel(unsigned* amax_bits, const T* x, std::int64_t rows, int cols,
                                 std::int64_t stride) {
  GridDependencyWait();
  unsigned m = 0;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * stride;
    for (int c = threadIdx.x; c < cols; c += kThreads) {
      m = max(m, __float_as_uint(fabsf(ToFloat(row[c]))));
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1)
    m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
  __shared__ unsigned warp_max[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) m = max(m, warp_max[w]);
    atomicMax(amax_bits, m);
  }
}

}  // namespace

cudaError_t FoldAbsMax(unsigned* amax_bits, const void* x, std::int64_t rows, std::int64_t cols,
                       std::int64_t stride, DType dtype, cudaStream_t stream) {
  if (rows < 0 || cols < 0 || cols > INT32_MAX || stride < cols) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(rows, 1024));
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    FoldAbsMaxKernel<T><<<blocks, kThreads, 0, stream>>>(amax_bits, static_cast<const T*>(x), rows,
                                                         static_cast<int>(cols), stride);
    return cudaGetLastError();
  });
  return cudaErrorInvalidValue;
}

}  // namespace inflight::kernels::cuda
