// How an engine's weights, activations and KV cache are quantized: the "quantization" object of
// the engine's config.json (docs/engine_format.md, "Quantization"). Names follow TensorRT-LLM's
// QuantConfig / quantize.py: quant_algo fp8 | int8_wo | int4_wo (--qformat), kv_cache_quant_algo
// fp8 (--kv_cache_dtype), group_size, has_zero_point, pre_quant_scale, exclude_modules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"

namespace inflight::model {

enum class QuantAlgo : std::uint8_t {
  kNone,
  kFp8,     // E4M3 weights and activations (W8A8), fp32 scales
  kInt8Wo,  // int8 weights, activations in the engine dtype (W8A16)
  kInt4Wo,  // int4 weights packed two per byte (W4A16)
};
enum class WeightScaleGranularity : std::uint8_t { kPerTensor, kPerChannel, kPerGroup };
enum class ActivationScaling : std::uint8_t {
  kNone,             // weight-only: activations are not quantized
  kDynamicPerToken,  // fp8: each token row scaled by its own amax / 448 at run time
  kStatic,           // fp8: one scale per linear (<linear>.input_scale), from the checkpoint
};

struct QuantConfig {
  QuantAlgo quant_algo = QuantAlgo::kNone;
  WeightScaleGranularity weight_granularity = WeightScaleGranularity::kPerTensor;
  std::int64_t group_size = 0;  // kPerGroup only: input columns per scale (and zero point)
  ActivationScaling activation_scaling = ActivationScaling::kNone;
  // int4_wo / int8_wo: <linear>.weight_zero holds a zero point per scale; false: the implicit zero
  // point 8 (int4, codes 0..15) or 0 (int8, signed codes).
  bool has_zero_point = false;
  // int4_wo / int8_wo: <linear>.g_idx maps each input column to its scale group (GPTQ act-order);
  // false: column c is in group c / group_size.
  bool has_group_index = false;
  // AWQ's activation smoothing as a separate per-column scale (ModelOpt's int4_awq). Always false:
  // the AutoAWQ checkpoints read here have it folded into the previous layer already; kept so an
  // engine that says true is refused by name rather than served wrong.
  bool pre_quant_scale = false;
  bool kv_cache_fp8 = false;  // kv_cache_quant_algo "fp8": layers.<i>.kv_cache_scale [2]
  // Engine modules left in the engine dtype. lm_head (and embed) always are; the list names them
  // for readers of config.json.
  std::vector<std::string> exclude_modules = {"lm_head"};
  // Where the quantized values came from: "inflight-build --qformat fp8", "compressed-tensors",
  // "modelopt", "awq", "gptq".
  std::string source;

  bool quantized_weights() const { return quant_algo != QuantAlgo::kNone; }
  bool any() const { return quantized_weights() || kv_cache_fp8; }
  // The dtype of <linear>.weight in a rank file.
  DType WeightDType() const;
  // Elements of <linear>.weight per output row for `in_features` inputs (int4: two per byte).
  std::int64_t PackedColumns(std::int64_t in_features) const;
  // Scale columns of a linear with `in_features` inputs: 1 (per tensor, per channel) or the groups.
  std::int64_t NumGroups(std::int64_t in_features) const;

  Status Validate() const;  // combinations this engine format can hold; errors name the field
};

const char* QuantAlgoName(QuantAlgo a);                  // "none", "fp8", "int8_wo", "int4_wo"
const char* GranularityName(WeightScaleGranularity g);   // "per_tensor", "per_channel", "per_group"
const char* ActivationScalingName(ActivationScaling s);  // "none", "dynamic_per_token", "static"
// --qformat's values: "fp8", "int8_wo", "int4_wo" (and "full_prec" for none, as quantize.py).
Result<QuantAlgo> ParseQuantAlgo(std::string_view name, const std::string& what);

// The engine tensors of a quantized linear (docs/engine_format.md): what each holds and its
// bytes, written from `m` under `q`.
enum class QuantPart : std::uint8_t {
  kWeight,
  kWeightScale,
  kWeightZero,
  kGroupIndex,
  kInputScale
};
const char* QuantPartSuffix(QuantPart p);  // "weight", "weight_scale", ...
DType QuantPartDType(const QuantConfig& q, QuantPart p);
std::vector<std::int64_t> QuantPartShape(const QuantConfig& q, QuantPart p, std::int64_t rows,
                                         std::int64_t cols, std::int64_t num_groups);

// The "quantization" object of config.json, and back. The text form is JSON of one object.
std::string QuantConfigToJson(const QuantConfig& q);
Result<QuantConfig> QuantConfigFromJson(const std::string& json_text, const std::string& origin);

}  // namespace inflight::model
