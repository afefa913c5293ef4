// A pipeline's step result on its way from the last stage to the first (model_runner.h's contract:
// the first stage answers the step): one fp32 message holding the logits, then the sampled tokens'
// bits, then their log-probabilities. Both ends know its length from the StepInput alone, since
// the StepOutput's shape (logit rows, sampled sequences) follows from it. Host code only: the CUDA
// runner sends the message through device memory, the tests check the layout on the CPU.
#pragma once

#include <cstddef>

#include "model/model_runner.h"

namespace inflight::model {

// Floats in the message of `out` (its logits and sampled vectors sized, values not needed).
std::size_t StepResultCount(const StepOutput& out);
// Writes out's values into message[0, StepResultCount(out)).
void PackStepResult(const StepOutput& out, float* message);
// Overwrites out's logits, sampled tokens and log-probabilities (already sized) from `message`.
void UnpackStepResult(const float* message, StepOutput& out);

}  // namespace inflight::model
