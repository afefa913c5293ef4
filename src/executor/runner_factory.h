// Picks the model runner for the configured device and sizes its KV pool.
#pragma once

#include <memory>
#include <string>

#include "inflight/executor.h"
#include "model/engine_config.h"
#include "model/model_runner.h"

namespace inflight::executor {

// `collectives`: this process's tensor- and pipeline-parallel group when the engine is split over
// processes (every rank calls Step alike: model/model_runner.h); null: one process runs the
// whole engine. With a group, the CUDA runner of group rank r (pp_rank * tp_size + tp_rank) runs
// on gpu_device_ids[r] when the ids are given (NVIDIA's one id per rank), else on device
// r % (visible devices).
Result<std::unique_ptr<model::ModelRunner>> CreateModelRunner(
    const std::string& engine_dir, const model::EngineConfig& engine, const ExecutorConfig& config,
    std::shared_ptr<model::Collectives> collectives = nullptr);

}  // namespace inflight::executor
