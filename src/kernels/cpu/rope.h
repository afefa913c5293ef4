// Rotary position embedding, GPT-NeoX "rotate-half" layout, with transformers' frequency scalings
// (modeling_rope_utils.py, transformers 5): linear, dynamic NTK, YaRN and Llama 3.
#pragma once

#include <cstdint>

namespace inflight::kernels::cpu {

enum class RopeScaling : std::uint8_t { kNone, kLinear, kDynamic, kYarn, kLlama3 };

struct RopeParams {
  std::int64_t head_dim = 0;  // rotary dimension = head_dim (even)
  double theta = 10000.0;
  RopeScaling scaling = RopeScaling::kNone;
  double factor = 1.0;            // linear, dynamic, yarn, llama3
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  // llama3, yarn: the pre-training context; dynamic: L0, the length past which theta grows.
  double original_max_position_embeddings = 0.0;
  double beta_fast = 32.0;  // yarn
  double beta_slow = 1.0;   // yarn
  bool truncate = true;     // yarn: floor / ceil the correction range
};

// inv_freq[i] for i in [0, head_dim/2), with d = head_dim and f_i = theta^(-2i/d) rounded to fp32
// (as transformers computes it in fp32):
//   kNone:    f_i
//   kLinear:  f_i / factor
//   kDynamic: f_i (the table of any forward call whose sequence length is <= L0; see below)
//   kYarn:    with dim(r) = d ln(orig / (2 pi r)) / (2 ln theta), low = max(dim(beta_fast), 0) and
//             high = min(dim(beta_slow), d - 1) (floored / ceiled when truncate; high += 0.001 when
//             equal), ramp_i = clamp((i - low) / (high - low), 0, 1):
//             f_i / factor * ramp_i + f_i * (1 - ramp_i)
//   kLlama3:  wavelen = 2 pi / f_i; f_i when wavelen < orig / high_freq_factor; f_i / factor when
//             wavelen > orig / low_freq_factor; else with s = (orig / wavelen - low_freq_factor) /
//             (high_freq_factor - low_freq_factor): (1 - s) f_i / factor + s f_i
void RopeInvFrequencies(const RopeParams& params, float* inv_freq);

// kDynamic only: the table of a forward call whose last position is seq_len - 1. For seq_len <=
// L0 it is RopeInvFrequencies'; beyond, theta becomes theta * (factor * seq_len / L0 - (factor -
// 1))^(d / (d - 2)) (transformers' _compute_dynamic_ntk_parameters, applied by
// dynamic_rope_update whenever a forward call's max position + 1 exceeds L0).
void RopeDynamicInvFrequencies(const RopeParams& params, std::int64_t seq_len, float* inv_freq);

// Rotates each head of x in place. x row t starts at x + t * token_stride and holds num_heads heads
// of head_dim contiguous floats. Token t is at position positions[t]; with half = head_dim/2,
// a = positions[t] * inv_freq[i] (fp32), c = cos(a) * scale and s = sin(a) * scale:
//   x'[i]        = x[i] * c - x[i + half] * s
//   x'[i + half] = x[i + half] * c + x[i] * s
// inv_freq: [head_dim/2] from RopeInvFrequencies. scale: yarn's attention_factor, else 1.
void ApplyRope(float* x, std::int64_t num_tokens, std::int64_t num_heads, std::int64_t head_dim,
               std::int64_t token_stride, const std::int32_t* positions, const float* inv_freq,
               float scale);

}  // namespace inflight::kernels::cpu
