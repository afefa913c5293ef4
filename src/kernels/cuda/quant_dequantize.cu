#include "kernels/cuda/quant_dequantize.h"

#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/quant_codes.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per output element. Grid: (min(ceil(n * k / kThreads), 65536)), Block: (kThreads);
// grid-stride. Runs once per linear per step on the fallback path, so plain, not tuned.
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

template <typename T>
cudaError_t LaunchTyped(void* out, const QuantWeight& w, std::int64_t n, std::int64_t k,
                        cudaStream_t stream) {
  const auto blocks =
      static_cast<unsigned>(std::min<std::int64_t>(CeilDiv(n * k, kThreads), 65536));
  T* y = static_cast<T*>(out);
  switch (w.kind) {
    case QuantWeightKind::kFp8E4M3:
      return LaunchProgrammatic(DequantizeKernel<T, QuantWeightKind::kFp8E4M3>, dim3(blocks),
                                dim3(kThreads), 0, stream, y, w, n, k);
    case QuantWeightKind::kInt8:
      return LaunchProgrammatic(DequantizeKernel<T, QuantWeightKind::kInt8>, dim3(blocks),
                                dim3(kThreads), 0, stream, y, w, n, k);
    case QuantWeightKind::kInt4:
      return LaunchProgrammatic(DequantizeKernel<T, QuantWeightKind::kInt4>, dim3(blocks),
                                dim3(kThreads), 0, stream, y, w, n, k);
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
