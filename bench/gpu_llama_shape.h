// What the GPU kernel benchmarks share about the model they run at: Llama-3.1-8B's attention and
// MLP shapes in bf16 with the runner's 64-token KV blocks, and one layer's K and V pools.
#pragma once

#include <cmath>
#include <cstdint>

#include "gpu_bench_util.h"
#include "kernels/cuda/paged_batch.h"

namespace inflight::bench::gpu {

// Llama-3.1-8B (config.json of meta-llama/Llama-3.1-8B) and the runner's block size.
constexpr std::int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kHidden = 4096;
constexpr std::int64_t kInter = 14336, kVocab = 128256, kTokensPerBlock = 64;
constexpr std::int64_t kQkvDim = (kHeads + 2 * kKvHeads) * kHeadDim;  // 6144: fused qkv row
constexpr std::int64_t kBf16 = 2;
constexpr DType kDType = DType::kBFloat16;
constexpr std::int64_t kBlockBytes = kKvHeads * kTokensPerBlock * kHeadDim * kBf16;  // one pool

inline const kernels::cuda::PagedKvShape kShape{kKvHeads, kTokensPerBlock, kHeadDim};
inline const float kScale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kHeadDim)));

// The K and V pools of one layer over a setup's blocks, random bf16.
struct Pools {
  DeviceBuffer k, v;
  Pools(std::int64_t num_blocks, cudaStream_t stream)
      : k(static_cast<std::size_t>(num_blocks * kBlockBytes)),
        v(static_cast<std::size_t>(num_blocks * kBlockBytes)) {
    FillUniform(k.get(), kDType, k.bytes() / kBf16, -1.0f, 1.0f, 501, stream);
    FillUniform(v.get(), kDType, v.bytes() / kBf16, -1.0f, 1.0f, 502, stream);
  }
};

}  // namespace inflight::bench::gpu
