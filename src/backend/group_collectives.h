// The collectives of one rank of a split engine, for the runner CreateModelRunner will build: NCCL
// between GPUs when the runner is the CUDA one (and the build has NCCL), MPI between CPU ranks
// otherwise. Leader mode and the orchestrator's workers both build their ranks with it.
#pragma once

#include <mpi.h>

#include <memory>

#include "inflight/executor.h"
#include "model/collectives.h"
#include "model/engine_config.h"

namespace inflight::backend {

// `comm`: the group (tp_size x pp_size processes); `rank`: this process's rank in it.
Result<std::shared_ptr<model::Collectives>> CreateGroupCollectives(
    MPI_Comm comm, const model::EngineConfig& engine, const ExecutorConfig& config, int rank);

}  // namespace inflight::backend
