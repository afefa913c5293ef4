// RoPE inverse frequencies of an engine (kernels/cpu/rope.h computes them from config.rope),
// shared by every model runner.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/rope.h"
#include "model/engine_config.h"

namespace inflight::model {

kernels::cpu::RopeParams RopeParamsOf(const EngineConfig& config);

// head_dim / 2 values; empty when the engine has learned positions instead of RoPE. For dynamic
// RoPE: the table of sequences no longer than the length past which theta grows.
std::vector<float> RopeInvFrequencies(const EngineConfig& config);

// The factor on cos and sin (yarn's attention_factor; 1 otherwise).
float RopeScale(const EngineConfig& config);

// Whether a step's frequencies can depend on each sequence's length: dynamic RoPE in an engine
// whose max_seq_len passes the length where theta starts to grow. False for every other engine,
// which then uses RopeInvFrequencies for all sequences.
bool RopeVariesWithLength(const EngineConfig& config);

// The frequencies of a sequence whose last position in this forward call is seq_len - 1 (as
// transformers' generate recomputes them per call for dynamic RoPE): head_dim / 2 values.
void RopeInvFrequenciesForLength(const EngineConfig& config, std::int64_t seq_len, float* out);

}  // namespace inflight::model
