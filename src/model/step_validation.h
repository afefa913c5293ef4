// Checks a StepInput against the engine and the KV pool before a runner touches any memory, so that
// a bad step is an error for that step and leaves the runner usable; and a runner's calibration
// target against its engine. Shared by every ModelRunner.
#pragma once

#include <cstdint>

#include "inflight/status.h"
#include "model/engine_config.h"
#include "model/model_runner.h"

namespace inflight::model {

// Each sequence: at least one token, num_cached >= 0, positions within the learned position table,
// token ids in the vocabulary, a block table covering every position with ids in [0,
// num_kv_blocks). previous_step_row: -1, or (only when `lookahead`, the runner's
// supports_lookahead) >= 0 with exactly one token, whose placeholder id is not checked; the
// runner checks the row against the step before (lookahead_tokens.h). Errors name the sequence
// index and seq_id.
Status ValidateStepInput(const StepInput& input, const EngineConfig& config,
                         std::int64_t num_kv_blocks, bool lookahead = false);

// RunnerOptions::observe_amax (and the CUDA runner's): an empty one gets the engine's layers; one
// of another layer count is an error.
Status PrepareObservedAmax(ActivationAmax& amax, std::int64_t num_layers);

}  // namespace inflight::model
