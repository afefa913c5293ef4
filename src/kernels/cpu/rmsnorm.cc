#include "kernels/cpu/rmsnorm.h"

#include <cmath>

namespace inflight::kernels::cpu {

void RmsNorm(float* out, const float* x, float* residual, WeightPtr weight, std::int64_t num_tokens,
             std::int64_t hidden, float eps) {
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * hidden;
    float* ot = out + t * hidden;
    const float* src = xt;
    if (residual != nullptr) {
      float* rt = residual + t * hidden;
      for (std::int64_t i = 0; i < hidden; ++i) rt[i] += xt[i];
      src = rt;
    }
    double sum_sq = 0.0;
    for (std::int64_t i = 0; i < hidden; ++i) sum_sq += static_cast<double>(src[i]) * src[i];
    const float inv_rms =
        static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(hidden) + eps));
    for (std::int64_t i = 0; i < hidden; ++i) ot[i] = src[i] * inv_rms * weight.Load(i);
  }
}

void HeadRmsNorm(float* x, std::int64_t num_tokens, std::int64_t num_heads, std::int64_t head_dim,
                 std::int64_t token_stride, WeightPtr weight, float eps) {
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    float* heads = x + t * token_stride;
    RmsNorm(heads, heads, nullptr, weight, num_heads, head_dim, eps);
  }
}

}  // namespace inflight::kernels::cpu
