#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace inflight::kernels::cpu {
namespace {

// theta^(-2i/d), rounded to fp32 first, as transformers computes inv_freq in fp32 before scaling.
float BaseFrequency(double theta, std::int64_t i, std::int64_t d) {
  return static_cast<float>(1.0 /
                            std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(d)));
}

double Llama3(const RopeParams& p, double f) {
  const double low_freq_wavelen = p.original_max_position_embeddings / p.low_freq_factor;
  const double high_freq_wavelen = p.original_max_position_embeddings / p.high_freq_factor;
  const double wavelen = 2.0 * std::numbers::pi / f;
  if (wavelen > low_freq_wavelen) return f / p.factor;
  if (wavelen < high_freq_wavelen) return f;
  const double s = (p.original_max_position_embeddings / wavelen - p.low_freq_factor) /
                   (p.high_freq_factor - p.low_freq_factor);
  return (1.0 - s) * f / p.factor + s * f;
}

// The dimension at which a frequency turns `rotations` times over the original context.
double YarnCorrectionDim(const RopeParams& p, double rotations) {
  const auto d = static_cast<double>(p.head_dim);
  return d * std::log(p.original_max_position_embeddings / (rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(p.theta));
}

}  // namespace

void RopeInvFrequencies(const RopeParams& p, float* inv_freq) {
  const std::int64_t half = p.head_dim / 2;
  double ramp_low = 0, ramp_high = 1;
  if (p.scaling == RopeScaling::kYarn) {
    ramp_low = YarnCorrectionDim(p, p.beta_fast);
    ramp_high = YarnCorrectionDim(p, p.beta_slow);
    if (p.truncate) {
      ramp_low = std::floor(ramp_low);
      ramp_high = std::ceil(ramp_high);
    }
    ramp_low = std::max(ramp_low, 0.0);
    ramp_high = std::min(ramp_high, static_cast<double>(p.head_dim - 1));
    if (ramp_low == ramp_high) ramp_high += 0.001;  // transformers' guard against a zero width
  }
  for (std::int64_t i = 0; i < half; ++i) {
    const double f = BaseFrequency(p.theta, i, p.head_dim);
    double scaled = f;
    switch (p.scaling) {
      case RopeScaling::kNone:
      case RopeScaling::kDynamic:
        break;
      case RopeScaling::kLinear:
        scaled = f / p.factor;
        break;
      case RopeScaling::kLlama3:
        scaled = Llama3(p, f);
        break;
      case RopeScaling::kYarn: {
        // ramp 0: extrapolation (f kept); ramp 1: interpolation (f / factor).
        const double ramp =
            std::clamp((static_cast<double>(i) - ramp_low) / (ramp_high - ramp_low), 0.0, 1.0);
        scaled = f / p.factor * ramp + f * (1.0 - ramp);
        break;
      }
    }
    inv_freq[i] = static_cast<float>(scaled);
  }
}

void RopeDynamicInvFrequencies(const RopeParams& p, std::int64_t seq_len, float* inv_freq) {
  const double original = p.original_max_position_embeddings;
  const auto length = static_cast<double>(seq_len);
  if (p.scaling != RopeScaling::kDynamic || length <= original) {
    RopeInvFrequencies(p, inv_freq);
    return;
  }
  const auto d = static_cast<double>(p.head_dim);
  const double theta =
      p.theta * std::pow(p.factor * length / original - (p.factor - 1.0), d / (d - 2.0));
  for (std::int64_t i = 0; i < p.head_dim / 2; ++i)
    inv_freq[i] = BaseFrequency(theta, i, p.head_dim);
}

void ApplyRope(float* x, std::int64_t num_tokens, std::int64_t num_heads, std::int64_t head_dim,
               std::int64_t token_stride, const std::int32_t* positions, const float* inv_freq,
               float scale) {
  const std::int64_t half = head_dim / 2;
  std::vector<float> cos_a(static_cast<std::size_t>(half)), sin_a(static_cast<std::size_t>(half));
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    for (std::int64_t i = 0; i < half; ++i) {
      // fp32 angle, as transformers' (inv_freq @ position) in fp32; cos/sin then in double, and
      // the attention factor applied to both, as transformers scales cos and sin.
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      cos_a[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * scale;
      sin_a[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * scale;
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
