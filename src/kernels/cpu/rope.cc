#include "kernels/cpu/rope.h"

#include <cmath>
#include <numbers>
#include <vector>

namespace inflight::kernels::cpu {

void RopeInvFrequencies(const RopeParams& p, float* inv_freq) {
  const std::int64_t half = p.head_dim / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    // NOTE: rounded to fp32 first, as Hugging Face computes inv_freq in fp32 before scaling it.
    const float base_f = static_cast<float>(
        1.0 / std::pow(p.theta, static_cast<double>(2 * i) / static_cast<double>(p.head_dim)));
    double f = base_f;
    if (p.llama3) {
      const double low_freq_wavelen = p.original_max_position_embeddings / p.low_freq_factor;
      const double high_freq_wavelen = p.original_max_position_embeddings / p.high_freq_factor;
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_freq_wavelen) {
        f = f / p.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double s = (p.original_max_position_embeddings / wavelen - p.low_freq_factor) /
                         (p.high_freq_factor - p.low_freq_factor);
        f = (1.0 - s) * f / p.factor + s * f;
      }
    }
    inv_freq[i] = static_cast<float>(f);
  }
}

void ApplyRope(float* x, std::int64_t num_tokens, std::int64_t num_heads, std::int64_t head_dim,
               std::int64_t token_stride, const std::int32_t* positions, const float* inv_freq) {
  const std::int64_t half = head_dim / 2;
  std::vector<float> cos_a(static_cast<std::size_t>(half)), sin_a(static_cast<std::size_t>(half));
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    for (std::int64_t i = 0; i < half; ++i) {
      // fp32 angle, as Hugging Face's (inv_freq @ position) in fp32; cos/sin then in double.
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      cos_a[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_a[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
    float* row = x + t * token_stride;
    for (std::int64_t h = 0; h < num_heads; ++h) {
      float* v = row + h * head_dim;
      for (std::int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cos_a[i] - b * sin_a[i];
        v[i + half] = b * cos_a[i] + a * sin_a[i];
      }
    }
  }
}

}  // namespace inflight::kernels::cpu
