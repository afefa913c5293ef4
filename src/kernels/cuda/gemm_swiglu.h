// A Llama MLP's first half in one kernel on Hopper: out = silu(x · W_gateᵀ) ⊙ (x · W_upᵀ), with
// the SwiGLU applied to the fp32 accumulators in the GEMM's epilogue. The separate path (cuBLASLt
// writing [m, 2 inter] in bf16, then kernels/cuda/activations.h SwiGlu reading it back) moves
// 3 m inter elements through memory that this kernel never writes: at 8192 tokens of Llama-3.1-8B,
// ~0.7 GB a layer. CUDA twin of the cpu runner's Linear + SwiGlu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

// Whether GemmSwiGlu runs these arguments on this device: an sm_90a build on a compute capability
// 9.0 device; dtype fp16 or bf16; m >= 1; inter a multiple of 128; k, x_stride and out_stride
// multiples of 8 and x, w and out 16-byte aligned (16-byte rows for the tensor copies and the
// stores); every size below 2^31.
bool GemmSwiGluSupports(DType dtype, std::int64_t m, std::int64_t inter, std::int64_t k,
                        const void* x, std::int64_t x_stride, const void* w, const void* out,
                        std::int64_t out_stride);

// out[t, i] = silu(g) * u for t < m, i < inter, with g = sum_j x[t, j] w[i, j] and
// u = sum_j x[t, j] w[inter + i, j] in fp32. x: device [m, k], row stride x_stride; w: device
// [2 inter, k] contiguous, the gate rows first and the up rows after them (the engine's gate_up
// layout); out: device [m, inter], row stride out_stride. Answers cudaErrorNotSupported where
// GemmSwiGluSupports does not hold (the caller takes the separate path).
cudaError_t GemmSwiGlu(void* out, std::int64_t out_stride, const void* x, std::int64_t x_stride,
                       const void* w, DType dtype, std::int64_t m, std::int64_t inter,
                       std::int64_t k, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
