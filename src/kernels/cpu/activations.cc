#include "kernels/cpu/activations.h"

#include <cmath>
#include <numbers>

namespace inflight::kernels::cpu {

void SwiGlu(float* out, const float* gate_up, std::int64_t num_tokens, std::int64_t inter) {
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    const float* gate = gate_up + t * 2 * inter;
    const float* up = gate + inter;
    float* o = out + t * inter;
    for (std::int64_t i = 0; i < inter; ++i) {
      const float g = gate[i];
      o[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  }
}

void GeluNew(float* out, const float* x, std::int64_t n) {
  const float k = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  }
}

}  // namespace inflight::kernels::cpu
