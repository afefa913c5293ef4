#include "kernels/cuda/embedding.h"

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Grid: (num_tokens), Block: (kThreads).
template <typename T>
__global__ void EmbeddingKernel(T* out, const std::int32_t* token_ids, const T* table,
                                std::int64_t hidden, const T* pos_table,
                                const std::int32_t* positions) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const std::int64_t t = blockIdx.x;
  const T* row = table + static_cast<std::int64_t>(token_ids[t]) * hidden;
  const T* pos_row =
      pos_table != nullptr ? pos_table + static_cast<std::int64_t>(positions[t]) * hidden : nullptr;
  T* o = out + t * hidden;
  for (std::int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    float v = ToFloat(row[i]);
    if (pos_row != nullptr) v += ToFloat(pos_row[i]);
    o[i] = FromFloat<T>(v);
  }
}

}  // namespace

cudaError_t EmbeddingGather(void* out, const std::int32_t* token_ids, std::int64_t num_tokens,
                            const void* table, std::int64_t hidden, const void* pos_table,
                            const std::int32_t* positions, DType dtype, cudaStream_t stream) {
  if (num_tokens < 0 || hidden <= 0 || num_tokens > 0x7fffffff) return cudaErrorInvalidValue;
  if (pos_table != nullptr && positions == nullptr) return cudaErrorInvalidValue;
  if (num_tokens == 0) return cudaSuccess;
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    return LaunchProgrammatic(EmbeddingKernel<T>, dim3(static_cast<unsigned>(num_tokens)),
                              dim3(kThreads), 0, stream, static_cast<T*>(out), token_ids,
                              static_cast<const T*>(table), hidden,
                              static_cast<const T*>(pos_table), positions);
  });
  return cudaSuccess;
}

}  // namespace inflight::kernels::cuda
