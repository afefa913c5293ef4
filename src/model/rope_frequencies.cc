#include "model/rope_frequencies.h"

namespace inflight::model {

kernels::cpu::RopeParams RopeParamsOf(const EngineConfig& config) {
  using kernels::cpu::RopeScaling;
  const RopeConfig& r = config.rope;
  kernels::cpu::RopeParams p;
  p.head_dim = config.head_dim;
  p.theta = r.theta;
  switch (r.type) {
    case RopeType::kDefault:
      p.scaling = RopeScaling::kNone;
      break;
    case RopeType::kLinear:
      p.scaling = RopeScaling::kLinear;
      break;
    case RopeType::kDynamic:
      p.scaling = RopeScaling::kDynamic;
      break;
    case RopeType::kYarn:
      p.scaling = RopeScaling::kYarn;
      break;
    case RopeType::kLlama3:
      p.scaling = RopeScaling::kLlama3;
      break;
  }
  p.factor = r.factor;
  p.low_freq_factor = r.low_freq_factor;
  p.high_freq_factor = r.high_freq_factor;
  p.original_max_position_embeddings = static_cast<double>(r.original_max_position_embeddings);
  p.beta_fast = r.beta_fast;
  p.beta_slow = r.beta_slow;
  p.truncate = r.truncate;
  return p;
}

std::vector<float> RopeInvFrequencies(const EngineConfig& config) {
  if (config.position_embedding != PositionEmbedding::kRope) return {};
  std::vector<float> inv(static_cast<std::size_t>(config.head_dim / 2));
  kernels::cpu::RopeInvFrequencies(RopeParamsOf(config), inv.data());
  return inv;
}

float RopeScale(const EngineConfig& config) {
  return static_cast<float>(config.rope.attention_factor);
}

bool RopeVariesWithLength(const EngineConfig& config) {
  return config.position_embedding == PositionEmbedding::kRope &&
         config.rope.type == RopeType::kDynamic &&
         config.build.max_seq_len > config.rope.original_max_position_embeddings;
}

void RopeInvFrequenciesForLength(const EngineConfig& config, std::int64_t seq_len, float* out) {
  kernels::cpu::RopeDynamicInvFrequencies(RopeParamsOf(config), seq_len, out);
}

}  // namespace inflight::model
