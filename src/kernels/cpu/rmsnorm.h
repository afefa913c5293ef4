// RMSNorm with an optional fused residual add (Llama family).
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_ptr.h"

namespace inflight::kernels::cpu {

// Row t (of num_tokens rows, each `hidden` contiguous floats):
//   residual == nullptr:  out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight
//   residual != nullptr:  residual[t] += x[t];  out[t] = norm(residual[t]) as above
// out may alias x. weight: [hidden].
void RmsNorm(float* out, const float* x, float* residual, WeightPtr weight, std::int64_t num_tokens,
             std::int64_t hidden, float eps);

// RMSNorm of every head of every row, in place (Qwen3's q_norm and k_norm, applied before RoPE:
// transformers' modeling_qwen3.py): row t at x + t * token_stride holds num_heads heads of head_dim
// contiguous floats (token_stride lets x point into a fused qkv output), and each head becomes
// head / sqrt(mean(head^2) + eps) * weight, weight: [head_dim].
void HeadRmsNorm(float* x, std::int64_t num_tokens, std::int64_t num_heads, std::int64_t head_dim,
                 std::int64_t token_stride, WeightPtr weight, float eps);

}  // namespace inflight::kernels::cpu
