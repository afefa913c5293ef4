// Host side of lookahead (ModelRunner::supports_lookahead, SequenceStep::previous_step_row): where
// the step launched last left its device-sampled ids, and which of the next step's tokens come
// from them. Host code only (no CUDA include), so that the checks are tested on the CPU; the CUDA
// runner of one process uses it and patches the tokens on the device
// (kernels/cuda/token_patch.h).
//
//   step N   (launched):  sequences 0 1 2 3   sampled on the device: 0, 2, 3  ->  words [w0 w1 w2]
//                                                              word_of_sequence = [0, -1, 1, 2]
//   step N+1 (launched before N completes): sequence k with previous_step_row 2 decodes words[1]
#pragma once

#include <cstdint>
#include <vector>

#include "inflight/status.h"
#include "model/model_runner.h"

namespace inflight::model {

// Sampled-id words of one step on the device (SampleRows' out_ids: an id or an error code), by
// sequence of some step.
struct SampledWords {
  const std::int32_t* words = nullptr;  // device memory; null when no sequence maps to a word
  // Per sequence: its word in `words`, or -1 (not sampled on the device / tokens as given).
  std::vector<std::int32_t> word_of_sequence;

  bool any() const {
    for (std::int32_t w : word_of_sequence) {
      if (w >= 0) return true;
    }
    return false;
  }
};

// Resolves `input`'s previous_step_row values against the step launched just before it (`previous`;
// null: none was, or it failed after part of it was queued, so its words are unknown). Returns,
// per sequence of `input`, the word of previous->words its one token comes from (-1: tokens as
// given), with previous->words. InvalidArgument naming the row and the sequence when a row is
// past the previous step's sequences or was not sampled on the device, or when a sequence with a
// row has more than one token. ValidateStepInput (step_validation.h) refuses rows on a runner
// without lookahead.
Result<SampledWords> ResolvePreviousStepRows(const StepInput& input, const SampledWords* previous);

}  // namespace inflight::model
