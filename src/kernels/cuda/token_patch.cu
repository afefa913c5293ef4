#include "kernels/cuda/token_patch.h"

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 128;

// Grid: (ceil(num_patches / kThreads)), Block: (kThreads): one patch a thread.
// NOTE: launched the ordinary way (not programmatic): it follows the step's upload, and the
// forward pass's first kernel, programmatic or not, starts only once every patch is written.
__global__ void PatchTokenIdsKernel(std::int32_t* token_ids, const std::int32_t* patches,
                                    std::int32_t num_patches, const std::int32_t* sampled_words,
                                    std::int32_t vocab_size) {
  const std::int32_t p =
      static_cast<std::int32_t>(blockIdx.x) * kThreads + static_cast<std::int32_t>(threadIdx.x);
  if (p >= num_patches) return;
  const std::int32_t dst = patches[2 * p], src = patches[2 * p + 1];
  const std::int32_t id = sampled_words[src];
  token_ids[dst] = id >= 0 && id < vocab_size ? id : 0;
}

}  // namespace

cudaError_t PatchTokenIds(std::int32_t* token_ids, const std::int32_t* patches,
                          std::int32_t num_patches, const std::int32_t* sampled_words,
                          std::int32_t vocab_size, cudaStream_t stream) {
  if (num_patches < 0 || vocab_size < 1) return cudaErrorInvalidValue;
  if (num_patches == 0) return cudaSuccess;
  if (token_ids == nullptr || patches == nullptr || sampled_words == nullptr) {
    return cudaErrorInvalidValue;
  }
  const unsigned blocks = static_cast<unsigned>((num_patches + kThreads - 1) / kThreads);
  PatchTokenIdsKernel<<<blocks, kThreads, 0, stream>>>(token_ids, patches, num_patches,
                                                       sampled_words, vocab_size);
  return cudaGetLastError();
}

}  // namespace inflight::kernels::cuda
