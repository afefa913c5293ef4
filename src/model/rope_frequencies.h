// RoPE inverse frequencies of an engine (rope_theta, llama3 scaling), shared by every model runner.
#pragma once

#include <vector>

#include "model/engine_config.h"

namespace inflight::model {

// head_dim / 2 values; empty when the engine has learned positions instead of RoPE.
std::vector<float> RopeInvFrequencies(const EngineConfig& config);

}  // namespace inflight::model
