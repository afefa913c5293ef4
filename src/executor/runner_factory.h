// Picks the model runner for the configured device and sizes its KV pool.
#pragma once

#include <memory>
#include <string>

#include "inflight/executor.h"
#include "model/engine_config.h"
#include "model/model_runner.h"

namespace inflight::executor {

// CPU KV pool when max_tokens_in_paged_kv_cache is unset: enough for every sequence at full length,
// capped at this many bytes.
inline constexpr std::int64_t kDefaultCpuKvCacheBytes = std::int64_t{1} << 30;

Result<std::unique_ptr<model::ModelRunner>> CreateModelRunner(const std::string& engine_dir,
                                                              const model::EngineConfig& engine,
                                                              const ExecutorConfig& config);

}  // namespace inflight::executor
