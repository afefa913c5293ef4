// Rotary position embedding, GPT-NeoX "rotate-half" layout, with optional llama3 frequency scaling.
#pragma once

#include <cstdint>

namespace inflight::kernels::cpu {

struct RopeParams {
  std::int64_t head_dim = 0;  // rotary dimension = head_dim (even)
  double theta = 10000.0;
  // llama3 scaling (Llama 3.1's rope_scaling {"rope_type": "llama3"}); off when !llama3.
  bool llama3 = false;
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
};

// inv_freq[i] for i in [0, head_dim/2): theta^(-2i/head_dim), then llama3-scaled when enabled:
//   wavelen = 2*pi / f;  wavelen < orig/high_freq_factor: f (kept);  wavelen >
//   orig/low_freq_factor: f/factor; otherwise s = (orig/wavelen - low) / (high - low) and f' = (1 -
//   s) * f/factor + s * f.
void RopeInvFrequencies(const RopeParams& params, float* inv_freq);

// Rotates each head of x in place. x row t starts at x + t * token_stride and holds num_heads heads
// of head_dim contiguous floats. Token t is at position positions[t]; with half = head_dim/2 and a
// = positions[t] * inv_freq[i]:
//   x'[i]        = x[i] * cos(a) - x[i + half] * sin(a)
//   x'[i + half] = x[i + half] * cos(a) + x[i] * sin(a)
// inv_freq: [head_dim/2] from RopeInvFrequencies.
void ApplyRope(float* x, std::int64_t num_tokens, std::int64_t num_heads, std::int64_t head_dim,
               std::int64_t token_stride, const std::int32_t* positions, const float* inv_freq);

}  // namespace inflight::kernels::cpu
