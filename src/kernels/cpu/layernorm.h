// LayerNorm with bias and an optional fused residual add (GPT-2).
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_ptr.h"

namespace inflight::kernels::cpu {

// Row t (of num_tokens rows, each `hidden` contiguous floats):
//   residual == nullptr:  out[t] = (x[t] - mean) / sqrt(var + eps) * weight + bias
//   residual != nullptr:  residual[t] += x[t];  out[t] = norm(residual[t]) as above
// var is the biased (population) variance, as torch.nn.LayerNorm. out may alias x.
// weight, bias: [hidden]; bias may be absent (null data).
void LayerNorm(float* out, const float* x, float* residual, WeightPtr weight, WeightPtr bias,
               std::int64_t num_tokens, std::int64_t hidden, float eps);

}  // namespace inflight::kernels::cpu
