// The context attention launcher template: picks the kernel for the head dim and device.
// Instantiated per head dim in paged_attention_context_hd*.cu so that the 2-core CI compiles them
// in parallel.
#pragma once

#include "common/env_switch.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_attention_context_common.cuh"
#include "kernels/cuda/paged_attention_context_mma_sync.cuh"
#include "kernels/cuda/paged_attention_context_wgmma.cuh"

namespace inflight::kernels::cuda::detail {

// INFLIGHT_CONTEXT_WGMMA=0 sends every head dim to the mma.sync kernel: an A/B switch, and how the
// GPU tests check that kernel at head dims 64 and 128 on Hopper.
inline bool ContextWgmmaAllowed() {
  static const bool allowed = EnvSwitchOn("INFLIGHT_CONTEXT_WGMMA");
  return allowed;
}

// Head dims that are a multiple of 64 run on wgmma where its sm_90a code runs (H100, hd 128, bf16,
// causal: 422-425 TFLOP/s at 1 x 4096 tokens, 452-454 at 4 x 4096, ~500 at 1 x 16384; mma.sync
// 290-322); the rest, and every other device, on mma.sync. Key tiles: 128 for hd 128, 64 for hd 64
// (the faster of the two on an H100).
template <typename T, int D, bool kWindow>
cudaError_t LaunchContextAttentionFor(const ContextArgs& args, cudaStream_t stream) {
  if constexpr (D % 64 == 0) {
    using Tiling = WgmmaContextTiling<D, D >= 128 ? 128 : 64>;
    // NOTE: decided once per process, for the device of the first call.
    static const bool wgmma = Sm90aCodeRuns(WgmmaContextKernel<T, D, Tiling, kWindow>);
    if (wgmma && ContextWgmmaAllowed())
      return LaunchContextAttentionWgmma<T, D, kWindow, Tiling>(args, stream);
  }
  return LaunchContextAttentionMmaSync<T, D, kWindow>(args, stream);
}

// A window (args.window > 0) takes the kernels' kWindow instantiations; full attention keeps its
// own, with no window arithmetic in them.
template <typename T, int D>
cudaError_t LaunchContextAttention(const ContextArgs& args, cudaStream_t stream) {
  if (args.window > 0) return LaunchContextAttentionFor<T, D, true>(args, stream);
  return LaunchContextAttentionFor<T, D, false>(args, stream);
}

// One per head dim, defined in paged_attention_context_hd<D>.cu.
cudaError_t LaunchContextAttentionHd64(const ContextArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchContextAttentionHd80(const ContextArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchContextAttentionHd96(const ContextArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchContextAttentionHd128(const ContextArgs& args, DType dtype, cudaStream_t stream);

}  // namespace inflight::kernels::cuda::detail
