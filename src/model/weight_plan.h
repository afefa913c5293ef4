// Which Hugging Face tensors make up each engine tensor of one tensor-parallel rank, and which part
// of each (docs/engine_format.md, "Weight names and layouts"). Pure bookkeeping: no file access.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/engine_config.h"
#include "model/quantized_matrix.h"

namespace inflight::model {

// A block of one checkpoint tensor. The tensor is seen as a matrix [rows, cols]: a 2-D tensor as
// stored (or transposed, for GPT-2's Conv1D [in, out]), a 1-D tensor as [n, 1]. The piece is rows
// [row_begin, row_end) x cols [col_begin, col_end) of that view. A zero piece has no source tensor.
struct WeightPiece {
  std::string hf_name;  // as in Llama-family checkpoints; GPT-2 names lack "transformer."
  std::vector<std::int64_t> hf_shape;  // the shape the checkpoint must have
  bool transpose = false;
  bool zeros = false;
  std::int64_t row_begin = 0, row_end = 0;
  std::int64_t col_begin = 0, col_end = 1;
};

// An engine tensor: its pieces stacked along rows give the tensor, row-major.
struct EngineWeight {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<WeightPiece> pieces;
  // A part of a quantized linear (model/quant_plan.h): pieces are then those of the linear's float
  // weight [linear_rows, linear_cols], and `shape` the part's own.
  std::optional<QuantPart> quant_part;
  std::int64_t linear_rows = 0, linear_cols = 0;
  bool kv_cache_scale = false;        // layers.<i>.kv_cache_scale [2]: no pieces
  std::optional<DType> stored_dtype;  // unset: the engine dtype
};

// Every tensor of tensor-parallel rank `rank` in file order, all layers (one pipeline stage).
// Precondition: config.Validate() is ok.
std::vector<EngineWeight> PlanRankWeights(const EngineConfig& config, std::int32_t rank);

// The tensors of one rank file, rank<file_rank>.safetensors (file_rank = pp_rank * tp_size +
// tp_rank, ModelShard::file_name): tensor-parallel rank file_rank % tp_size's tensors of pipeline
// stage file_rank / tp_size, which are its layers [first_layer, last_layer); embed (and pos_embed)
// on the first stage; final_norm and lm_head on the last, with embed there too when the lm_head is
// tied to it (model/transformer_weights.cc binds exactly these). Precondition as above.
std::vector<EngineWeight> PlanFileWeights(const EngineConfig& config, std::int32_t file_rank);

}  // namespace inflight::model
