#include "model/attention_windows.h"

#include <algorithm>
#include <string>

namespace inflight::model {

using kernels::cpu::AttentionWindow;

Result<std::vector<AttentionWindow>> ResolveAttentionWindows(const EngineConfig& config,
                                                             const AttentionLimits& limits) {
  const std::vector<std::int32_t>& list = limits.max_attention_window;
  const std::int64_t layers = config.num_layers;
  if (static_cast<std::int64_t>(list.size()) > layers) {
    return InvalidArgument("max_attention_window_size has " + std::to_string(list.size()) +
                           " values, more than the engine's " + std::to_string(layers) +
                           " layers; give one value, or up to one per layer (repeated over the "
                           "layers when shorter)");
  }
  for (std::int32_t w : list) {
    if (w < 1) {
      return InvalidArgument("max_attention_window_size " + std::to_string(w) +
                             " is out of range: must be >= 1");
    }
  }
  const std::int32_t sink = limits.sink_token_length;
  if (sink < 0) {
    return InvalidArgument("sink_token_length " + std::to_string(sink) +
                           " is out of range: must be >= 0");
  }
  const std::int64_t max_seq_len = config.build.max_seq_len;
  std::vector<AttentionWindow> windows(static_cast<std::size_t>(layers));
  for (std::int64_t l = 0; l < layers; ++l) {
    const std::int64_t engine_window = config.AttentionWindow(l);
    std::int64_t keys = engine_window > 0 ? engine_window : max_seq_len;
    if (!list.empty()) {
      keys = std::min<std::int64_t>(keys, list[static_cast<std::size_t>(l) % list.size()]);
    }
    if (keys >= max_seq_len) continue;  // no query of this engine has more keys: full attention
    if (sink >= keys) {
      return InvalidArgument(
          "sink_token_length " + std::to_string(sink) + " leaves layer " + std::to_string(l) +
          " no recent key: its attention window is " + std::to_string(keys) +
          " keys (the engine's sliding window " +
          (engine_window > 0 ? std::to_string(engine_window) : std::string("none")) +
          ", max_attention_window_size " +
          (list.empty() ? std::string("unset")
                        : std::to_string(list[static_cast<std::size_t>(l) % list.size()])) +
          "), and the sinks count among those keys; sink_token_length must be smaller");
    }
    windows[static_cast<std::size_t>(l)] = {static_cast<std::int32_t>(keys - sink), sink};
  }
  return windows;
}

std::string DescribeAttentionWindows(const std::vector<AttentionWindow>& windows) {
  std::string text;
  for (std::size_t first = 0; first < windows.size();) {
    std::size_t last = first;
    const AttentionWindow w = windows[first];
    while (last + 1 < windows.size() && windows[last + 1].window == w.window &&
           windows[last + 1].sink == w.sink) {
      ++last;
    }
    if (w.windowed()) {
      if (!text.empty()) text += ", ";
      text += first == last ? "layer " + std::to_string(first)
                            : "layers " + std::to_string(first) + "-" + std::to_string(last);
      text += ": window " + std::to_string(w.window);
      if (w.sink > 0) text += " + " + std::to_string(w.sink) + " sinks";
    }
    first = last + 1;
  }
  return text;
}

}  // namespace inflight::model
