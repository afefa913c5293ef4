// Where quantization enters the engine build: the quantized linears' tensors in a rank's plan, and
// how each is filled from a source of quantized matrices (the builder's own quantizer, or a
// pre-quantized checkpoint: model/quant_sources.h). docs/engine_format.md, "Quantization".
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "inflight/status.h"
#include "model/engine_config.h"
#include "model/quantized_matrix.h"
#include "model/weight_plan.h"

namespace inflight::model {

// The decoder linears that are quantized: layers.<i>.{qkv, attn_out, gate_up, fc, down}.weight.
// embed and lm_head are not.
bool IsQuantizedLinear(std::string_view engine_weight_name);

// The layer of an engine weight named "layers.<i>.<rest>": i.
std::int64_t LayerOf(const std::string& engine_weight_name);

// `plan` (PlanRankWeights of one rank, or PlanFileWeights of one stage's) with each quantized
// linear's ".weight" replaced by its parts (weight, weight_scale, weight_zero, g_idx, input_scale
// as config.quant asks) and, with an FP8 KV cache, layers.<i>.kv_cache_scale after each of the
// plan's layers. Unchanged without quantization.
std::vector<EngineWeight> QuantizeRankPlan(const EngineConfig& config,
                                           std::vector<EngineWeight> plan);

// Refuses, by tensor name, a quantized linear that this engine format cannot hold or shard: int4
// with an odd number of input columns, or a tensor-parallel slice that cuts scale groups.
Status CheckQuantizedLayout(const EngineConfig& config);

// A checkpoint seen as quantized linears (one per Hugging Face weight name, as the float plan's
// pieces name them: "model.layers.0.self_attn.q_proj.weight") and per-layer KV cache scales.
class QuantizedLinearSource {
 public:
  virtual ~QuantizedLinearSource() = default;
  // Checks that the linear is there with the layout its format promises for a float view of
  // `shape` [out, in]; nothing is read beyond headers.
  virtual Status Check(const std::string& hf_weight_name,
                       const std::vector<std::int64_t>& shape) const = 0;
  // Shared, not copied: a linear's parts (codes, scales, ...) and every rank's slice ask for the
  // same matrix, and copies of it were ~20% of an FP8 build.
  virtual Result<std::shared_ptr<const QuantizedMatrix>> Load(
      const std::string& hf_weight_name, const std::vector<std::int64_t>& shape) const = 0;
  // {k_scale, v_scale} of layer `layer`: K (V) is stored as e4m3(K / k_scale).
  virtual Result<std::array<float, 2>> KvCacheScales(std::int64_t layer) const = 0;
};

// Fills `w` (a quantized part or a KV cache scale of QuantizeRankPlan's plan) from `source`:
// each piece's matrix is loaded, sliced and stacked, then written in the engine layout.
Status FillQuantizedWeight(const EngineConfig& config, const QuantizedLinearSource& source,
                           const EngineWeight& w, std::byte* dst);

}  // namespace inflight::model
