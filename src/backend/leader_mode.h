// How a model instance gets its executor: in this process alone, or as one rank of a leader-mode
// group (NVIDIA's default process model for an engine split over tp_size x pp_size processes,
// started as `mpirun -n <tp*pp> tritonserver ...` or `launch_server.py --world_size N`).
//
//   MPI world size 1 (no mpirun, or mpirun -n 1): the engine must be tp 1 x pp 1; Executor::Create.
//   world size N > 1: the engine must have tp_size x pp_size == N. Every rank loads its shard with
//     MPI collectives; rank 0 gets an executor whose runner broadcasts each step (model/
//     leader_runner.h). Ranks > 0 never return: they follow the leader's steps inside
//     model-instance initialisation (so the server on those ranks never binds its ports, as with
//     NVIDIA's backend), and when the leader stops the model they finalise MPI and exit with status
//     0.
//
// Orchestrator mode (TRTLLM_ORCHESTRATOR=1, launch_server.py --multi-model): orchestrator_mode.h.
#pragma once

#include <memory>

#include "backend/model_state.h"
#include "inflight/executor.h"

namespace inflight::backend {

// The executor of `model`'s instance in this process. Errors name what does not fit: the world size
// against the engine's tp_size x pp_size, gpu_device_ids or participant_ids against the world, a
// second instance in one rank, a rank that failed to load (by its number and its error).
Result<std::unique_ptr<Executor>> StartExecutor(const ModelState& model);

}  // namespace inflight::backend
