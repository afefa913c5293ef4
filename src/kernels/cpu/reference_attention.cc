#include "kernels/cpu/reference_attention.h"

#include <cmath>
#include <vector>

namespace inflight::kernels::cpu {

void ReferenceAttention(float* out, const float* q, const float* k, const float* v,
                        std::int64_t num_q, std::int64_t num_kv, std::int64_t num_heads,
                        std::int64_t num_kv_heads, std::int64_t head_dim, float scale,
                        const AttentionWindow& window) {
  const std::int64_t group = num_heads / num_kv_heads;
  std::vector<double> p(static_cast<std::size_t>(num_kv));
  for (std::int64_t i = 0; i < num_q; ++i) {
    const std::int64_t pos = num_kv - num_q + i;
    for (std::int64_t h = 0; h < num_heads; ++h) {
      const float* qi = q + (i * num_heads + h) * head_dim;
      const std::int64_t kvh = h / group;
      double max_s = -INFINITY;
      for (std::int64_t j = 0; j < num_kv; ++j) {
        if (!window.Visible(pos, j)) continue;
        const float* kj = k + (j * num_kv_heads + kvh) * head_dim;
        double s = 0.0;
        for (std::int64_t d = 0; d < head_dim; ++d) s += static_cast<double>(qi[d]) * kj[d];
        p[j] = s * scale;
        if (p[j] > max_s) max_s = p[j];
      }
      double sum = 0.0;
      for (std::int64_t j = 0; j < num_kv; ++j) {
        p[j] = window.Visible(pos, j) ? std::exp(p[j] - max_s) : 0.0;
        sum += p[j];
      }
      float* o = out + (i * num_heads + h) * head_dim;
      for (std::int64_t d = 0; d < head_dim; ++d) {
        double a = 0.0;
        for (std::int64_t j = 0; j < num_kv; ++j) {
          if (window.Visible(pos, j)) a += p[j] * v[(j * num_kv_heads + kvh) * head_dim + d];
        }
        o[d] = static_cast<float>(a / sum);
      }
    }
  }
}

}  // namespace inflight::kernels::cpu
