// Picks the model runner for the configured device and sizes its KV pool.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "inflight/executor.h"
#include "model/engine_config.h"
#include "model/model_runner.h"

namespace inflight::executor {

// CPU KV pool when max_tokens_in_paged_kv_cache is unset: enough for every sequence at full length,
// capped at this many bytes.
inline constexpr std::int64_t kDefaultCpuKvCacheBytes = std::int64_t{1} << 30;

// Where one process's runner sits in a split engine (leader mode, backend/leader_mode.h).
struct RunnerPlacement {
  // This process's tensor- and pipeline-parallel group; null: one process runs the whole engine.
  std::shared_ptr<model::Collectives> collectives;
  // The CUDA device of this rank; unset: the first of ExecutorConfig::gpu_device_ids, else 0.
  std::optional<int> cuda_device;
};

Result<std::unique_ptr<model::ModelRunner>> CreateModelRunner(
    const std::string& engine_dir, const model::EngineConfig& engine, const ExecutorConfig& config,
    const RunnerPlacement& placement = {});

}  // namespace inflight::executor
