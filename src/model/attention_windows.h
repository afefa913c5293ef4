// Which keys each layer attends: the engine's own sliding windows (EngineConfig::attention_windows,
// from the checkpoint) combined with the runtime's limits (AttentionLimits, from the model's
// config.pbtxt), as one kernels::cpu::AttentionWindow per layer for the attention kernels.
#pragma once

#include <vector>

#include "inflight/status.h"
#include "kernels/cpu/paged_kv.h"
#include "model/engine_config.h"
#include "model/model_runner.h"

namespace inflight::model {

// Layer l attends at most A_l = min(engine window of l (0: none), limit of l) keys, the query's own
// included, where the limit of l is max_attention_window[l % size] (TensorRT-LLM repeats a list
// shorter than the layers: docs/source/features/long-sequence.md). With sink_token_length S > 0
// the first S positions are among those A_l keys and the recent window shrinks to A_l - S, as in
// TensorRT-LLM's cyclic KV cache, whose A_l slots hold the sinks too (kvCacheManager.cpp:
// mMaxTokenNum = maxAttentionWindow + the sinks' bubble). A_l >= build.max_seq_len never hides a
// key: that layer gets {0, 0}, full attention, so that it keeps the kernels' unwindowed path.
//
// Errors name the field and value: a limit < 1, a list longer than num_layers, a negative
// sink_token_length, or one that leaves a layer no recent key (S >= A_l).
Result<std::vector<kernels::cpu::AttentionWindow>> ResolveAttentionWindows(
    const EngineConfig& config, const AttentionLimits& limits);

// "layers 0-3: window 4092 + 4 sinks, layer 5: window 128" for logs; empty when every layer is
// full.
std::string DescribeAttentionWindows(const std::vector<kernels::cpu::AttentionWindow>& windows);

}  // namespace inflight::model
