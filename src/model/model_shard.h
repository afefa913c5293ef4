// Which part of an engine one process runs (docs/engine_format.md, "Tensor parallelism"): rank
// tp_rank's slice of every tensor-parallel weight, and pipeline stage pp_rank's contiguous range of
// layers. tp 1, pp 1 is the whole engine. The runners bind rank<file_rank()>.safetensors, size
// the heads, the MLP and the KV pools from the shard, and run layers [first_layer, last_layer).
#pragma once

#include <cstdint>
#include <string>

#include "inflight/status.h"
#include "model/engine_config.h"

namespace inflight::model {

struct ModelShard {
  std::int32_t tp_rank = 0;
  std::int32_t tp_size = 1;
  std::int32_t pp_rank = 0;
  std::int32_t pp_size = 1;
  // The stage's layers: [first_layer, last_layer) of the engine's num_layers.
  std::int64_t first_layer = 0;
  std::int64_t last_layer = 0;
  // This rank's part of the tensor-parallel dimensions: the engine's divided by tp_size, kv heads
  // replicated when there are fewer than ranks (EngineConfig::LocalKvHeads).
  std::int64_t num_q_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t intermediate_size = 0;
  // The vocabulary ids whose logits this rank computes: lm_head rows [vocab_begin, vocab_end), a
  // contiguous 1 / tp_size of the vocabulary (a vocabulary-parallel lm_head; the builder stores
  // lm_head whole on every rank and each rank reads its rows). The last stage only.
  std::int64_t vocab_begin = 0;
  std::int64_t vocab_end = 0;

  bool first_stage() const { return pp_rank == 0; }
  bool last_stage() const { return pp_rank == pp_size - 1; }
  std::int64_t num_layers() const { return last_layer - first_layer; }
  // Columns of this rank's qkv output and rows of its fused qkv weight.
  std::int64_t q_dim(std::int64_t head_dim) const { return num_q_heads * head_dim; }
  std::int64_t qkv_rows(std::int64_t head_dim) const {
    return (num_q_heads + 2 * num_kv_heads) * head_dim;
  }
  // The engine file of this rank: rank<pp_rank * tp_size + tp_rank>.safetensors (TensorRT-LLM's
  // rank order: tensor-parallel ranks of one stage are adjacent).
  std::string file_name() const;
};

// The shard of tensor-parallel rank `tp_rank` of `tp_size` in pipeline stage `pp_rank` of
// `pp_size`. Errors name the value and what is accepted: sizes that differ from the engine's
// tp_size / pp_size, ranks outside [0, size), more stages than layers.
Result<ModelShard> MakeModelShard(const EngineConfig& config, std::int32_t tp_rank,
                                  std::int32_t tp_size, std::int32_t pp_rank, std::int32_t pp_size);

}  // namespace inflight::model
