// Static FP8 scales for inflight-build --qformat fp8 --calib_dataset, as TensorRT-LLM builds FP8
// engines from ModelOpt's calibration: one scale per weight, shared by the checkpoint weights
// fused into one GEMM (q/k/v, gate/up: the GEMM takes one scalar), and one scale per linear input;
// with --kv_cache_dtype fp8, a K and a V scale per layer. Input and KV scales are the calibrated
// amax / 448 (model/activation_amax.h); weight scales are the weights' own amax / 448, taken by
// the build-time quantizer (model/quant_sources.h).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "inflight/status.h"
#include "model/activation_amax.h"
#include "model/engine_config.h"

namespace inflight::model {

struct StaticFp8Scales {
  struct Weight {
    std::string name;  // checkpoint name: "model.layers.0.self_attn.k_proj.weight"
    std::vector<std::int64_t> shape;
  };
  // By checkpoint weight name: the weights whose largest |w| is its scale's (itself and those fused
  // with it, in engine order), and the scale of its input (--qformat fp8 only).
  std::map<std::string, std::vector<Weight>> weight_groups;
  std::map<std::string, float> input_scales;
  // By layer, {k_scale, v_scale} (--kv_cache_dtype fp8 only).
  std::vector<std::array<float, 2>> kv_scales;
};

// The scales of `config`'s engine (quantization settings applied) from `amax`. Errors: a point
// where the float engine's calibration pass saw NaN or inf, named by layer and point.
Result<StaticFp8Scales> PlanStaticFp8Scales(const EngineConfig& config, const ActivationAmax& amax);

}  // namespace inflight::model
