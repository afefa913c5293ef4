// Orchestrator mode (TRTLLM_ORCHESTRATOR=1, launch_server.py --multi-model): the server process
// (MPI world size 1) spawns each instance's tp_size x pp_size ranks with MPI_Comm_spawn (our
// inflight-executor-worker, or executor_worker_path) and runs the executor over them
// (model/mpi_orchestrator.h). gpu_device_ids "0,1;2,3" gives instance i the i-th group.
#pragma once

#include <memory>

#include "backend/model_state.h"
#include "inflight/executor.h"

namespace inflight::backend {

// The executor of instance `instance_index` of `model`, over workers spawned for it.
Result<std::unique_ptr<Executor>> StartOrchestratedInstance(const ModelState& model,
                                                            int instance_index);

}  // namespace inflight::backend
