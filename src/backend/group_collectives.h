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

// `comm`: the group (tp_size x pp_size processes); `local_rank`: this process's rank among the
// group's ranks on its host (model/mpi_node_layout.h), which picks its GPU: gpu_device_ids'
// entry for it, else it modulo the host's devices. The NCCL collectives carry that device, and
// the CUDA runner runs on it (Collectives::device()).
Result<std::shared_ptr<model::Collectives>> CreateGroupCollectives(
    MPI_Comm comm, const model::EngineConfig& engine, const ExecutorConfig& config, int local_rank);

}  // namespace inflight::backend
