// The per-instantiation entry points of the weight-only quantized GEMM: launch, shared memory
// limit, resident blocks. Included by quant_gemm_mixed_int4.cu and quant_gemm_mixed_int8.cu, each
// instantiating its kind for both dtypes and every token tile.
#pragma once

#include "kernels/cuda/quant_gemm_mixed_kernel.cuh"

namespace inflight::kernels::cuda {

template <typename T, QuantWeightKind kKind, int kTokens>
cudaError_t LaunchQuantMixedGemm(const MixedGemmArgs& args, dim3 grid, cudaStream_t stream) {
  return LaunchProgrammatic(QuantMixedGemmKernel<T, kKind, kTokens>, grid,
                            dim3(MixedTiles<kKind, kTokens>::kThreads),
                            MixedTiles<kKind, kTokens>::kSharedBytes, stream, args);
}

template <typename T, QuantWeightKind kKind, int kTokens>
cudaError_t SetQuantMixedGemmSharedLimit() {
  return cudaFuncSetAttribute(QuantMixedGemmKernel<T, kKind, kTokens>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              MixedTiles<kKind, kTokens>::kSharedBytes);
}

// Blocks of this kernel an SM holds at once (its limit raised first); 1 when the runtime cannot
// tell.
template <typename T, QuantWeightKind kKind, int kTokens>
int QuantMixedGemmBlocksPerSm() {
  int blocks = 0;
  if (SetQuantMixedGemmSharedLimit<T, kKind, kTokens>() != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &blocks, QuantMixedGemmKernel<T, kKind, kTokens>, MixedTiles<kKind, kTokens>::kThreads,
          MixedTiles<kKind, kTokens>::kSharedBytes) != cudaSuccess) {
    cudaGetLastError();
    return 1;
  }
  return blocks > 0 ? blocks : 1;
}

#define INFLIGHT_QUANT_MIXED_GEMM_INSTANCE(T, KIND, TOKENS)                              \
  template cudaError_t LaunchQuantMixedGemm<T, KIND, TOKENS>(const MixedGemmArgs&, dim3, \
                                                             cudaStream_t);              \
  template cudaError_t SetQuantMixedGemmSharedLimit<T, KIND, TOKENS>();                  \
  template int QuantMixedGemmBlocksPerSm<T, KIND, TOKENS>();

#define INFLIGHT_QUANT_MIXED_GEMM_INSTANCES(KIND)             \
  INFLIGHT_QUANT_MIXED_GEMM_INSTANCE(__half, KIND, 16)        \
  INFLIGHT_QUANT_MIXED_GEMM_INSTANCE(__half, KIND, 32)        \
  INFLIGHT_QUANT_MIXED_GEMM_INSTANCE(__half, KIND, 64)        \
  INFLIGHT_QUANT_MIXED_GEMM_INSTANCE(__nv_bfloat16, KIND, 16) \
  INFLIGHT_QUANT_MIXED_GEMM_INSTANCE(__nv_bfloat16, KIND, 32) \
  INFLIGHT_QUANT_MIXED_GEMM_INSTANCE(__nv_bfloat16, KIND, 64)

}  // namespace inflight::kernels::cuda
