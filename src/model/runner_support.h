// What the model runners compute today, checked when one loads an engine: an engine that needs more
// is refused by the name of the field, never run as something else.
#pragma once

#include <string>

#include "inflight/status.h"
#include "model/engine_config.h"

namespace inflight::model {

// Refuses, naming the field: attention_windows with a window (sliding-window attention) and
// qk_norm (Qwen3's per-head q/k RMSNorm), which the runners' attention does not compute yet.
// `runner` names the runner in the error ("cpu model runner").
Status CheckRunnerSupports(const EngineConfig& config, const std::string& runner);

}  // namespace inflight::model
