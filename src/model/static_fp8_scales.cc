#include "model/static_fp8_scales.h"

#include <cmath>
#include <string_view>

#include "model/quant_plan.h"
#include "model/quantized_matrix.h"
#include "model/weight_plan.h"

namespace inflight::model {
namespace {

const char* PointName(AmaxPoint p) {
  switch (p) {
    case AmaxPoint::kQkvInput:
      return "q/k/v projection input";
    case AmaxPoint::kAttnOutInput:
      return "attention output projection input";
    case AmaxPoint::kMlpInput:
      return "MLP input";
    case AmaxPoint::kDownInput:
      return "down projection input";
    case AmaxPoint::kKey:
      return "K";
    case AmaxPoint::kValue:
      return "V";
  }
  return "?";
}

// The input an engine linear ("layers.<i>.<linear>.weight") quantizes.
AmaxPoint InputOf(std::string_view engine_name) {
  const std::size_t end = engine_name.rfind('.');  // before "weight"
  const std::size_t begin = engine_name.rfind('.', end - 1) + 1;
  const std::string_view linear = engine_name.substr(begin, end - begin);
  if (linear == "qkv") return AmaxPoint::kQkvInput;
  if (linear == "attn_out") return AmaxPoint::kAttnOutInput;
  if (linear == "down") return AmaxPoint::kDownInput;
  return AmaxPoint::kMlpInput;  // gate_up, fc
}

}  // namespace

Result<StaticFp8Scales> PlanStaticFp8Scales(const EngineConfig& config,
                                            const ActivationAmax& amax) {
  if (static_cast<std::int64_t>(amax.layers.size()) != config.num_layers) {
    return InvalidArgument("the calibration holds " + std::to_string(amax.layers.size()) +
                           " layers; the engine has " + std::to_string(config.num_layers));
  }
  auto scale_at = [&](std::int64_t layer, AmaxPoint p) -> Result<float> {
    const float a = amax.at(layer, p);
    if (!std::isfinite(a)) {
      return InvalidArgument("calibration: the float engine's layer " + std::to_string(layer) +
                             " " + PointName(p) +
                             " reached NaN or inf on the calibration data; no FP8 scale fits it");
    }
    return Fp8ScaleOfAmax(a);
  };
  StaticFp8Scales s;
  const QuantConfig& q = config.quant;
  if (q.quant_algo == QuantAlgo::kFp8) {
    // Rank 0's plan names every checkpoint weight whole (other ranks slice the same ones).
    for (const EngineWeight& w : PlanRankWeights(config, 0)) {
      if (!IsQuantizedLinear(w.name)) continue;
      std::vector<StaticFp8Scales::Weight> group;
      for (const WeightPiece& p : w.pieces) group.push_back({p.hf_name, p.hf_shape});
      ASSIGN_OR_RETURN(float input, scale_at(LayerOf(w.name), InputOf(w.name)));
      for (const WeightPiece& p : w.pieces) {
        s.weight_groups[p.hf_name] = group;
        s.input_scales[p.hf_name] = input;
      }
    }
  }
  if (q.kv_cache_fp8) {
    for (std::int64_t layer = 0; layer < config.num_layers; ++layer) {
      ASSIGN_OR_RETURN(float k, scale_at(layer, AmaxPoint::kKey));
      ASSIGN_OR_RETURN(float v, scale_at(layer, AmaxPoint::kValue));
      s.kv_scales.push_back({k, v});
    }
  }
  return s;
}

}  // namespace inflight::model
