#include "model/model_shard.h"

namespace inflight::model {

std::string ModelShard::file_name() const {
  return "rank" + std::to_string(pp_rank * tp_size + tp_rank) + ".safetensors";
}

Result<ModelShard> MakeModelShard(const EngineConfig& c, std::int32_t tp_rank, std::int32_t tp_size,
                                  std::int32_t pp_rank, std::int32_t pp_size) {
  if (tp_size != c.tp_size || pp_size != c.pp_size) {
    return InvalidArgument("the engine is built for tp_size " + std::to_string(c.tp_size) +
                           ", pp_size " + std::to_string(c.pp_size) +
                           "; this runner's process group has tp_size " + std::to_string(tp_size) +
                           ", pp_size " + std::to_string(pp_size) + " (they must be equal)");
  }
  if (tp_rank < 0 || tp_rank >= tp_size) {
    return InvalidArgument("tp_rank " + std::to_string(tp_rank) + " is not in [0, " +
                           std::to_string(tp_size) + ")");
  }
  if (pp_rank < 0 || pp_rank >= pp_size) {
    return InvalidArgument("pp_rank " + std::to_string(pp_rank) + " is not in [0, " +
                           std::to_string(pp_size) + ")");
  }
  if (c.num_layers < pp_size) {
    return InvalidArgument("pp_size " + std::to_string(pp_size) + " is more than num_layers " +
                           std::to_string(c.num_layers) + ": a stage needs at least one layer");
  }
  ModelShard s;
  s.tp_rank = tp_rank;
  s.tp_size = tp_size;
  s.pp_rank = pp_rank;
  s.pp_size = pp_size;
  s.first_layer = pp_rank * c.num_layers / pp_size;
  s.last_layer = (pp_rank + 1) * c.num_layers / pp_size;
  // NOTE: EngineConfig::Validate checked that tp_size divides the heads and the MLP, as the
  // builder's weight plan (model/weight_plan.cc) assumes.
  s.num_q_heads = c.num_attention_heads / tp_size;
  s.num_kv_heads = c.LocalKvHeads(tp_size);
  s.intermediate_size = c.intermediate_size / tp_size;
  s.vocab_begin = tp_rank * c.vocab_size / tp_size;
  s.vocab_end = (tp_rank + 1) * c.vocab_size / tp_size;
  return s;
}

}  // namespace inflight::model
