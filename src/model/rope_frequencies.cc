#include "model/rope_frequencies.h"

#include "kernels/cpu/rope.h"

namespace inflight::model {

std::vector<float> RopeInvFrequencies(const EngineConfig& config) {
  if (config.position_embedding != PositionEmbedding::kRope) return {};
  kernels::cpu::RopeParams p;
  p.head_dim = config.head_dim;
  p.theta = config.rope_theta;
  if (config.rope_scaling) {
    p.llama3 = true;
    p.factor = config.rope_scaling->factor;
    p.low_freq_factor = config.rope_scaling->low_freq_factor;
    p.high_freq_factor = config.rope_scaling->high_freq_factor;
    p.original_max_position_embeddings =
        static_cast<double>(config.rope_scaling->original_max_position_embeddings);
  }
  std::vector<float> inv(static_cast<std::size_t>(config.head_dim / 2));
  kernels::cpu::RopeInvFrequencies(p, inv.data());
  return inv;
}

}  // namespace inflight::model
