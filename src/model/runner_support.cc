#include "model/runner_support.h"

namespace inflight::model {

Status CheckRunnerSupports(const EngineConfig& config, const std::string& runner) {
  for (std::size_t i = 0; i < config.attention_windows.size(); ++i) {
    const std::int64_t window = config.attention_windows[i];
    if (window == 0) continue;
    return Unsupported(runner + ": engine attention_windows[" + std::to_string(i) + "] is " +
                       std::to_string(window) +
                       " (sliding-window attention, from the checkpoint's sliding_window), which "
                       "this runner does not compute yet; supported: 0 (full attention). An "
                       "engine built with --max_seq_len <= " +
                       std::to_string(window) + " has full attention only");
  }
  if (config.qk_norm) {
    return Unsupported(runner + ": engine qk_norm is true (" + config.architecture_name +
                       "'s per-head q_norm / k_norm), which this runner does not compute yet; "
                       "supported: false");
  }
  return Status::Ok();
}

}  // namespace inflight::model
