#include "model/lookahead_tokens.h"

#include <string>

namespace inflight::model {

Result<SampledWords> ResolvePreviousStepRows(const StepInput& input, const SampledWords* previous) {
  SampledWords out;
  out.word_of_sequence.assign(input.sequences.size(), -1);
  for (std::size_t i = 0; i < input.sequences.size(); ++i) {
    const SequenceStep& s = input.sequences[i];
    const std::int32_t row = s.previous_step_row;
    if (row < 0) continue;
    const std::string who = "previous_step_row " + std::to_string(row) + " of sequence " +
                            std::to_string(i) + " (seq_id " + std::to_string(s.seq_id) + "): ";
    if (s.tokens.size() != 1) {
      return InvalidArgument(who + "the sequence has " + std::to_string(s.tokens.size()) +
                             " tokens; a token from the step before is one decode token");
    }
    if (previous == nullptr) {
      return InvalidArgument(who +
                             "no step was launched before this one (or it failed part-way), so "
                             "there is no sampled token to take");
    }
    const auto rows = static_cast<std::int64_t>(previous->word_of_sequence.size());
    if (row >= rows) {
      return InvalidArgument(who + "the step launched before had " + std::to_string(rows) +
                             " sequences");
    }
    const std::int32_t word = previous->word_of_sequence[static_cast<std::size_t>(row)];
    if (word < 0 || previous->words == nullptr) {
      return InvalidArgument(who + "sequence " + std::to_string(row) +
                             " of the step launched before had no device_sampling");
    }
    out.word_of_sequence[i] = word;
    out.words = previous->words;
  }
  return out;
}

}  // namespace inflight::model
