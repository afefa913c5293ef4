#include "model/step_validation.h"

#include <cstdint>
#include <string>

namespace inflight::model {

Status ValidateStepInput(const StepInput& input, const EngineConfig& config,
                         std::int64_t num_kv_blocks, bool lookahead) {
  const std::int64_t tpb = config.build.tokens_per_block;
  for (std::size_t i = 0; i < input.sequences.size(); ++i) {
    const SequenceStep& s = input.sequences[i];
    const std::string who =
        "sequence " + std::to_string(i) + " (seq_id " + std::to_string(s.seq_id) + "): ";
    if (s.tokens.empty())
      return InvalidArgument(who + "tokens is empty; at least 1 token is needed");
    if (s.num_cached < 0) {
      return InvalidArgument(who + "num_cached is " + std::to_string(s.num_cached) +
                             ", must be >= 0");
    }
    const std::int64_t end = static_cast<std::int64_t>(s.num_cached) + s.tokens.size();
    if (end > INT32_MAX) return InvalidArgument(who + "positions exceed the 32-bit range");
    if (config.position_embedding == PositionEmbedding::kLearned &&
        end > config.max_position_embeddings) {
      return InvalidArgument(who + "last position " + std::to_string(end - 1) +
                             " is past the learned position table (max_position_embeddings " +
                             std::to_string(config.max_position_embeddings) + ")");
    }
    if (s.previous_step_row < -1) {
      return InvalidArgument(who + "previous_step_row is " + std::to_string(s.previous_step_row) +
                             ", must be -1 (tokens as given) or a row >= 0");
    }
    if (s.previous_step_row >= 0) {
      if (!lookahead) {
        return InvalidArgument(who + "previous_step_row is " + std::to_string(s.previous_step_row) +
                               ", but this runner has no lookahead (supports_lookahead is false); "
                               "accepted: -1");
      }
      if (s.tokens.size() != 1) {
        return InvalidArgument(who + "previous_step_row is " + std::to_string(s.previous_step_row) +
                               " with " + std::to_string(s.tokens.size()) +
                               " tokens; a token from the step before is one decode token");
      }
    }
    // A token the runner takes from the step before is a placeholder here (any value).
    for (std::size_t t = 0; t < s.tokens.size() && s.previous_step_row < 0; ++t) {
      if (s.tokens[t] < 0 || s.tokens[t] >= config.vocab_size) {
        return InvalidArgument(who + "token " + std::to_string(t) + " is id " +
                               std::to_string(s.tokens[t]) + ", must be in [0, " +
                               std::to_string(config.vocab_size) + ")");
      }
    }
    const std::int64_t blocks_needed = (end + tpb - 1) / tpb;
    if (static_cast<std::int64_t>(s.block_table.size()) < blocks_needed) {
      return InvalidArgument(who + "block_table has " + std::to_string(s.block_table.size()) +
                             " blocks but positions [0, " + std::to_string(end) + ") need " +
                             std::to_string(blocks_needed) + " (tokens_per_block " +
                             std::to_string(tpb) + ")");
    }
    for (std::int64_t b = 0; b < blocks_needed; ++b) {
      if (s.block_table[b] < 0 || s.block_table[b] >= num_kv_blocks) {
        return InvalidArgument(who + "block_table[" + std::to_string(b) + "] is " +
                               std::to_string(s.block_table[b]) + ", must be in [0, " +
                               std::to_string(num_kv_blocks) + ")");
      }
    }
  }
  return Status::Ok();
}

Status PrepareObservedAmax(ActivationAmax& amax, std::int64_t num_layers) {
  if (amax.layers.empty()) amax.layers.assign(static_cast<std::size_t>(num_layers), {});
  if (static_cast<std::int64_t>(amax.layers.size()) != num_layers) {
    return InvalidArgument("observe_amax holds " + std::to_string(amax.layers.size()) +
                           " layers; the engine has " + std::to_string(num_layers));
  }
  return Status::Ok();
}

}  // namespace inflight::model
