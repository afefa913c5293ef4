// What the CUDA runner adds for a split engine (model_shard.h) around each step: waiting for the
// stream without hanging when a peer fails, and, with pipeline stages, bringing the last stage's
// StepOutput back to the first stage (model_runner.h's contract).
#pragma once

#include <cuda_runtime_api.h>

#include "model/collectives.h"
#include "model/cuda_buffer.h"
#include "model/model_runner.h"
#include "model/model_shard.h"

namespace inflight::model {

// Blocks until `stream`'s queued work is done. One process (tp 1 x pp 1) synchronises; a group
// polls the stream and asks the collectives every millisecond or so whether the wait can still
// end (Collectives::CheckWait: a peer's failure or the group's timeout is an error).
Status WaitForGroupStream(cudaStream_t stream, const ModelShard& shard, Collectives& group);
// The same for the work before `event` (recorded, on any stream) of a group's runner.
Status WaitForGroupEvent(cudaEvent_t event, Collectives& group);

// With pp > 1, after the step's results are on the host: the last stage sends its logits and
// sampled tokens / log-probabilities to the first stage's same tp rank through device memory
// (`staging`, grown as needed), which replaces its own with them; stages in between clear
// theirs. Both ends know the sizes, which follow from the StepInput alone. pp 1: nothing.
Status ReturnStepToFirstStage(const ModelShard& shard, Collectives& group, cudaStream_t stream,
                              DeviceBuffer& staging, StepOutput& out);

}  // namespace inflight::model
