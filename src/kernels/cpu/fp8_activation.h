// FP8 activations of a W8A8 linear: the input rows quantized to E4M3 exactly as the GPU's
// quantize step does before its FP8 GEMM, left in place as the values they dequantize to, so the
// fp32 GEMM that follows computes sum_i e4m3(x_i / s_x) * s_x * w_i: the FP8 GEMM's product.
#pragma once

#include <cstdint>

namespace inflight::kernels::cpu {

// x: [num_tokens, n] with row stride `stride`. static_scale > 0: every row scaled by it (a
// calibrated input_scale); 0: per token, s = amax(row) / 448 (1 for a row of zeros). Values past
// ±448 s saturate. In place: x[t, i] = e4m3(x[t, i] / s) * s.
void QuantizeActivationsFp8(float* x, std::int64_t num_tokens, std::int64_t n, std::int64_t stride,
                            float static_scale);

}  // namespace inflight::kernels::cpu
