// The FP8 (W8A8) MLP's first half in one kernel on Hopper: the gate/up GEMM of E4M3 codes, SwiGLU,
// and the down linear's E4M3 codes under its static input scale, so that neither the gate/up
// products ([m, 2 inter] in bf16, 470 MB a layer at 8,192 tokens of Llama-3.1-8B) nor a separate
// codes pass reading them back exist. The same arithmetic as QuantLinear::RunSwiGluFp8Rows
// (cuBLASLt with fast accumulation, then Fp8GemmSwiGluEpilogueCodes); the fp32 sums differ only in
// their order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cuda/fp8_activation_producers.h"

namespace inflight::kernels::cuda {

// Whether GemmSwiGluFp8 runs these arguments on this device: an sm_90a build on a compute
// capability 9.0 device; dtype fp16 or bf16; m >= 1; inter a multiple of 128; k a multiple of 16;
// x.codes, w and col_scales (per channel) 16-byte aligned, out.codes 8-byte aligned; out_scale a
// positive finite float; every size below 2^31.
bool GemmSwiGluFp8Supports(DType dtype, std::int64_t m, std::int64_t inter, std::int64_t k,
                           const Fp8Rows& x, const std::uint8_t* w, const float* col_scales,
                           bool per_channel, float out_scale, const Fp8Rows& out);

// For t < m, i < inter: g = bf16(sum_j e4m3(x.codes[t, j]) e4m3(w[i, j])) * x.row_scales[t] *
// col_scales[i or 0] and u likewise from row inter + i of w, each rounded to dtype;
// act = dtype(silu(g) u); out.codes[t, i] = e4m3(act / out_scale) and out.row_scales[t] =
// out_scale. x.codes: device [m, k] contiguous; w: device [2 inter, k] E4M3 contiguous (gate rows
// first); col_scales: device [2 inter] (per_channel) or [1]; out.codes: device [m, inter]
// contiguous. Answers cudaErrorNotSupported where GemmSwiGluFp8Supports does not hold.
cudaError_t GemmSwiGluFp8(Fp8Rows out, float out_scale, Fp8Rows x, const std::uint8_t* w,
                          const float* col_scales, bool per_channel, DType dtype, std::int64_t m,
                          std::int64_t inter, std::int64_t k, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
