// The kernels that produce a W8A8 linear's input also quantize it: FP8 codes and their row scales
// come straight out of the RMSNorm before qkv and gate/up, and out of the gate/up epilogue (SwiGLU)
// before down, so no separate pass reads the activations back (quant_activation_fp8.h's) and they
// are written a byte an element instead of two. Each gives the bits of its unfused pair: the value
// rounded to dtype first, then s = static_scale, or the row's amax / 448 (1 for a row of zeros),
// then code = e4m3(value / s) with a true division.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

// FP8 codes of rows and each row's scale: codes device [m, k] E4M3 contiguous, row_scales [m].
struct Fp8Rows {
  std::uint8_t* codes = nullptr;
  float* row_scales = nullptr;
};

// RmsNorm(x) without a residual (rmsnorm.h), then QuantizeActivationsFp8 into codes: x device
// [num_tokens, hidden] in dtype (fp16 / bf16), weight [hidden]. cudaErrorNotSupported where the
// one-pass kernel does not fit (RmsNormFp8Takes false): run the two passes.
cudaError_t RmsNormQuantFp8(Fp8Rows out, const void* x, const void* weight, DType dtype,
                            std::int64_t num_tokens, std::int64_t hidden, float eps,
                            float static_scale, cudaStream_t stream);
// hidden a multiple of 8 and at most 8192; x and weight 16-byte aligned; codes 8-byte aligned.
bool RmsNormFp8Takes(std::int64_t hidden, const void* x, const void* weight,
                     const std::uint8_t* codes);

// Fp8GemmSwiGluEpilogue (quant_gemm_fp8.h) of raw [m, 2 * inter], then QuantizeActivationsFp8 of
// its act rows into out (codes [m, inter]). cudaErrorNotSupported where Fp8SwiGluCodesTakes is
// false.
cudaError_t Fp8GemmSwiGluEpilogueCodes(Fp8Rows out, const void* raw, const float* row_scales,
                                       const float* col_scales, bool per_channel, const void* bias,
                                       DType dtype, std::int64_t m, std::int64_t inter,
                                       float static_scale, cudaStream_t stream);
// inter a multiple of 8 and at most 32768; raw, per-channel scales and bias 16-byte aligned; codes
// 8-byte aligned.
bool Fp8SwiGluCodesTakes(std::int64_t inter, const void* raw, const float* col_scales,
                         bool per_channel, const void* bias, const std::uint8_t* codes);

}  // namespace inflight::kernels::cuda
