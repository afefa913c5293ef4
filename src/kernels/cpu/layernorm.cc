#include "kernels/cpu/layernorm.h"

#include <cmath>

namespace inflight::kernels::cpu {

void LayerNorm(float* out, const float* x, float* residual, WeightPtr weight, WeightPtr bias,
               std::int64_t num_tokens, std::int64_t hidden, float eps) {
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * hidden;
    float* ot = out + t * hidden;
    const float* src = xt;
    if (residual != nullptr) {
      float* rt = residual + t * hidden;
      for (std::int64_t i = 0; i < hidden; ++i) rt[i] += xt[i];
      src = rt;
    }
    // Two passes (mean, then centred squares) to avoid the cancellation of E[x^2] - E[x]^2.
    double sum = 0.0;
    for (std::int64_t i = 0; i < hidden; ++i) sum += src[i];
    const double mean = sum / static_cast<double>(hidden);
    double sum_sq = 0.0;
    for (std::int64_t i = 0; i < hidden; ++i) {
      const double d = src[i] - mean;
      sum_sq += d * d;
    }
    const double inv_std = 1.0 / std::sqrt(sum_sq / static_cast<double>(hidden) + eps);
    for (std::int64_t i = 0; i < hidden; ++i) {
      float v = static_cast<float>((src[i] - mean) * inv_std) * weight.Load(i);
      if (bias) v += bias.Load(i);
      ot[i] = v;
    }
  }
}

}  // namespace inflight::kernels::cpu
