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

}  // namespace inflight::kernels::cpu
