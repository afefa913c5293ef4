// The model arithmetic inflight-bench-executor sets its measures against: the bytes a batch-1
// decode step must read, the FLOPs of a prompt, and the bandwidth the decode floor divides by.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/engine_config.h"

namespace inflight::bench {

// Bytes of weights one batch-1 decode step reads: every matrix, but only one row of the embedding
// table (unless it doubles as the output projection). From the engine's files' sizes, or for an
// engine whose weights are made at load, from the sizes its rank files would have.
std::int64_t WeightBytesPerStep(const std::string& engine_dir, const model::EngineConfig& cfg);

// K and V of every layer for `context` positions, bytes_per_value each (the CPU runner keeps the
// cache in fp32, the CUDA runner in the engine's dtype, both in one byte when it is FP8).
std::int64_t KvBytes(const model::EngineConfig& cfg, double context, std::int64_t bytes_per_value);

// FLOPs of one prompt of `len` tokens through the model: the dense layers for every token, causal
// attention (q·k and p·v over the keys at or before each row) and lm_head for the last row only.
double PrefillFlops(const model::EngineConfig& c, std::int64_t len);

// The bandwidth the decode floor divides by, and where it came from.
struct FloorBandwidth {
  double gbps = 0;
  std::string source;
};

// The card's device-to-device copy rate (the better of cudaMemcpy and a copy kernel over 1 GiB, as
// inflight-bench-gpu-ceilings reports it), or nothing when this build or machine has no GPU.
// Measure it before the executor takes most of the card's memory for its KV cache.
std::optional<FloorBandwidth> MeasureDeviceCopy();

// given_gbps when > 0 (--bandwidth_gbps), else the device copy rate when the model runs on a GPU,
// else host memcpy.
FloorBandwidth DecodeFloorBandwidth(double given_gbps, bool on_gpu,
                                    const std::optional<FloorBandwidth>& device_copy);

}  // namespace inflight::bench
