#include "model/hf_quant_config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "model/json_fields.h"

namespace inflight::model {
namespace {

using json = nlohmann::json;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Modules a checkpoint leaves unquantized: only the LM head may be among them (the engine keeps
// lm_head and embed in the engine dtype; a partly quantized decoder is not built).
Status CheckExcluded(const JsonFields& f, const char* key) {
  const json* list = f.Get(key);
  if (list == nullptr) return Status::Ok();
  if (!list->is_array()) return f.Error(key, "is " + list->dump() + ", expected a list of names");
  for (const json& e : *list) {
    const std::string name = e.is_string() ? e.get<std::string>() : e.dump();
    if (name != "lm_head" && name != "re:.*lm_head" && name != "model.embed_tokens") {
      return Unsupported(f.where() + ": \"" + key + "\" lists \"" + name +
                         "\"; only lm_head (and model.embed_tokens) may stay unquantized "
                         "(accepted: lm_head, re:.*lm_head)");
    }
  }
  return Status::Ok();
}

Status Expect(const JsonFields& f, const char* key, const json& accepted, const std::string& says) {
  const json* v = f.Get(key);
  if (v != nullptr && *v == accepted) return Status::Ok();
  if (v == nullptr && accepted.is_null()) return Status::Ok();
  return Unsupported(f.where() + ": \"" + key + "\" " + f.Dump(key) + " is not supported; " + says);
}

// compressed-tensors' QuantizationArgs for FP8 ("type": "float", "num_bits": 8).
Status ReadFp8Args(const JsonFields& f, const std::set<std::string>& strategies,
                   std::string* strategy, bool* dynamic) {
  RETURN_IF_ERROR(Expect(f, "num_bits", 8, "accepted: 8 (FP8 E4M3)"));
  RETURN_IF_ERROR(Expect(f, "type", "float", "accepted: \"float\" (FP8 E4M3)"));
  RETURN_IF_ERROR(Expect(f, "symmetric", true, "accepted: true"));
  RETURN_IF_ERROR(Expect(f, "group_size", nullptr, "accepted: null"));
  RETURN_IF_ERROR(Expect(f, "block_structure", nullptr, "accepted: null"));
  RETURN_IF_ERROR(Expect(f, "actorder", nullptr, "accepted: null"));
  RETURN_IF_ERROR(f.String("strategy", strategy));
  if (strategies.count(*strategy) == 0) {
    std::string accepted;
    for (const auto& s : strategies) accepted += (accepted.empty() ? "" : ", ") + s;
    return Unsupported(f.where() + ": \"strategy\" \"" + *strategy +
                       "\" is not supported; accepted: " + accepted);
  }
  RETURN_IF_ERROR(f.Bool("dynamic", dynamic, false));
  f.MarkRead("observer");
  f.MarkRead("observer_kwargs");
  return Status::Ok();
}

Status ReadCompressedTensors(const JsonFields& f, CheckpointQuantization* out) {
  QuantConfig& q = out->engine;
  std::string format;
  RETURN_IF_ERROR(f.String("format", &format));
  if (format != "float-quantized" && format != "naive-quantized") {
    return Unsupported(f.where() + ": \"format\" \"" + format +
                       "\" is not supported; accepted: float-quantized, naive-quantized (FP8)");
  }
  std::string status = "compressed";
  RETURN_IF_ERROR(f.String("quantization_status", &status, false));
  if (status != "compressed") {
    return Unsupported(f.where() + ": \"quantization_status\" \"" + status +
                       "\" is not supported; accepted: compressed");
  }
  const json* sparsity = f.Get("sparsity_config");
  if (sparsity != nullptr && !sparsity->empty()) {
    return Unsupported(f.where() + ": \"sparsity_config\" is not supported; accepted: null or {}");
  }
  const json* groups = f.Get("config_groups");
  if (groups == nullptr || !groups->is_object() || groups->size() != 1) {
    return Unsupported(f.where() + ": \"config_groups\" " + f.Dump("config_groups") +
                       " is not supported; accepted: one group (every Linear quantized alike)");
  }
  const std::string group_name = groups->begin().key();
  const JsonFields g(groups->begin().value(), f.where() + " config_groups." + group_name);
  const json* targets = g.Get("targets");
  if (targets == nullptr || *targets != json::array({"Linear"})) {
    return Unsupported(g.where() + ": \"targets\" " + g.Dump("targets") +
                       " is not supported; accepted: [\"Linear\"]");
  }
  RETURN_IF_ERROR(Expect(g, "output_activations", nullptr, "accepted: null"));
  const json* weights = g.Get("weights");
  if (weights == nullptr || !weights->is_object()) {
    return Unsupported(g.where() + ": \"weights\" is required (an object)");
  }
  std::string strategy;
  bool dynamic = false;
  RETURN_IF_ERROR(ReadFp8Args(JsonFields(*weights, g.where() + " weights"), {"channel", "tensor"},
                              &strategy, &dynamic));
  if (dynamic) {
    return Unsupported(g.where() + " weights: \"dynamic\" true is not supported; accepted: false");
  }
  q.quant_algo = QuantAlgo::kFp8;
  // Per-tensor scales become per-channel: q/k/v and gate/up fuse into one GEMM whose rows keep
  // their own tensor's scale.
  q.weight_granularity = WeightScaleGranularity::kPerChannel;
  const json* input = g.Get("input_activations");
  if (input == nullptr) {
    return Unsupported(g.where() +
                       ": \"input_activations\" null (FP8 weight-only) is not "
                       "supported; accepted: FP8 activations, strategy tensor or token");
  }
  RETURN_IF_ERROR(ReadFp8Args(JsonFields(*input, g.where() + " input_activations"),
                              {"tensor", "token"}, &strategy, &dynamic));
  if (strategy == "tensor" && !dynamic) {
    q.activation_scaling = ActivationScaling::kStatic;
  } else if (strategy == "token" && dynamic) {
    q.activation_scaling = ActivationScaling::kDynamicPerToken;
  } else {
    return Unsupported(g.where() + " input_activations: strategy \"" + strategy +
                       "\" with dynamic " + (dynamic ? "true" : "false") +
                       " is not supported; accepted: tensor with dynamic false, token with "
                       "dynamic true");
  }
  RETURN_IF_ERROR(CheckExcluded(f, "ignore"));
  if (const json* kv = f.Get("kv_cache_scheme")) {
    std::string kv_strategy;
    bool kv_dynamic = false;
    RETURN_IF_ERROR(ReadFp8Args(JsonFields(*kv, f.where() + " kv_cache_scheme"), {"tensor"},
                                &kv_strategy, &kv_dynamic));
    if (kv_dynamic) {
      return Unsupported(f.where() +
                         " kv_cache_scheme: \"dynamic\" true is not supported; "
                         "accepted: false (k_scale / v_scale in the checkpoint)");
    }
    q.kv_cache_fp8 = true;
    out->kv_scales_in_checkpoint = true;
  }
  for (const char* k : {"global_compression_ratio", "version", "transform_config"}) f.MarkRead(k);
  return Status::Ok();
}

Status ReadAwq(const JsonFields& f, CheckpointQuantization* out) {
  QuantConfig& q = out->engine;
  RETURN_IF_ERROR(f.Int32("bits", &out->bits));
  if (out->bits != 4) {
    return Unsupported(f.where() + ": \"bits\" " + std::to_string(out->bits) +
                       " is not supported for quant_method \"awq\"; accepted: 4");
  }
  RETURN_IF_ERROR(f.Int("group_size", &q.group_size));
  if (q.group_size < 2) {
    return Unsupported(f.where() + ": \"group_size\" " + std::to_string(q.group_size) +
                       " is not supported for quant_method \"awq\"; accepted: a group size >= 2");
  }
  bool zero_point = true;
  RETURN_IF_ERROR(f.Bool("zero_point", &zero_point, false));
  if (!zero_point) {
    return Unsupported(f.where() +
                       ": \"zero_point\" false is not supported for quant_method "
                       "\"awq\"; accepted: true");
  }
  std::string version = "gemm";
  RETURN_IF_ERROR(f.String("version", &version, false));
  if (Lower(version) != "gemm") {
    return Unsupported(f.where() + ": \"version\" \"" + version +
                       "\" is not supported for quant_method \"awq\"; accepted: gemm");
  }
  const json* skip = f.Get("modules_to_not_convert");
  if (skip != nullptr && !skip->empty()) {
    return Unsupported(f.where() + ": \"modules_to_not_convert\" " + skip->dump() +
                       " is not supported; accepted: null or [] (every decoder linear quantized)");
  }
  q.quant_algo = QuantAlgo::kInt4Wo;
  q.weight_granularity = WeightScaleGranularity::kPerGroup;
  q.has_zero_point = true;
  return Status::Ok();
}

Status ReadGptq(const JsonFields& f, CheckpointQuantization* out) {
  QuantConfig& q = out->engine;
  RETURN_IF_ERROR(f.Int32("bits", &out->bits));
  if (out->bits != 4 && out->bits != 8) {
    return Unsupported(f.where() + ": \"bits\" " + std::to_string(out->bits) +
                       " is not supported for quant_method \"gptq\"; accepted: 4, 8");
  }
  RETURN_IF_ERROR(f.Int("group_size", &q.group_size));
  if (q.group_size == -1) {
    q.weight_granularity = WeightScaleGranularity::kPerChannel;
    q.group_size = 0;
  } else if (q.group_size >= 2) {
    q.weight_granularity = WeightScaleGranularity::kPerGroup;
  } else {
    return Unsupported(f.where() + ": \"group_size\" " + std::to_string(q.group_size) +
                       " is not supported; accepted: -1 (per channel) or a group size >= 2");
  }
  bool desc_act = false, sym = true;
  RETURN_IF_ERROR(f.Bool("desc_act", &desc_act, false));
  RETURN_IF_ERROR(f.Bool("sym", &sym, false));  // either way the stored zero points are used
  if (desc_act && q.weight_granularity == WeightScaleGranularity::kPerChannel) desc_act = false;
  q.has_group_index = desc_act;
  std::string format = "gptq";
  RETURN_IF_ERROR(f.String("checkpoint_format", &format, false));
  if (format == "gptq") {
    out->gptq_zeros_minus_one = true;
  } else if (format == "gptq_v2") {
    out->gptq_zeros_minus_one = false;
  } else {
    return Unsupported(f.where() + ": \"checkpoint_format\" \"" + format +
                       "\" is not supported; accepted: gptq, gptq_v2");
  }
  const json* modules = f.Get("modules_in_block_to_quantize");
  if (modules != nullptr) {
    return Unsupported(f.where() + ": \"modules_in_block_to_quantize\" " + modules->dump() +
                       " is not supported; accepted: null (every decoder linear quantized)");
  }
  q.quant_algo = out->bits == 4 ? QuantAlgo::kInt4Wo : QuantAlgo::kInt8Wo;
  q.has_zero_point = true;
  // Quantization-time settings that leave the stored values as they are, and kernel choices.
  for (const char* k : {"damp_percent", "true_sequential", "static_groups", "model_name_or_path",
                        "model_file_base_name", "use_exllama", "exllama_config", "use_cuda_fp16",
                        "dataset", "tokenizer", "batch_size", "max_input_length",
                        "cache_block_outputs", "pad_token_id", "is_marlin_format", "meta"})
    f.MarkRead(k);
  return Status::Ok();
}

Status ReadModelOptSettings(const JsonFields& f, CheckpointQuantization* out) {
  QuantConfig& q = out->engine;
  std::string algo;
  RETURN_IF_ERROR(f.String("quant_algo", &algo));
  if (algo != "FP8") {
    return Unsupported(f.where() + ": \"quant_algo\" \"" + algo +
                       "\" is not supported; accepted: FP8");
  }
  q.quant_algo = QuantAlgo::kFp8;
  q.weight_granularity = WeightScaleGranularity::kPerChannel;  // per-tensor scales, expanded
  q.activation_scaling = ActivationScaling::kStatic;           // input_scale per linear
  if (const json* kv = f.Get("kv_cache_quant_algo")) {
    if (*kv != "FP8") {
      return Unsupported(f.where() + ": \"kv_cache_quant_algo\" " + kv->dump() +
                         " is not supported; accepted: FP8 or null");
    }
    q.kv_cache_fp8 = true;
    out->kv_scales_in_checkpoint = true;
  }
  RETURN_IF_ERROR(CheckExcluded(f, "exclude_modules"));
  for (const char* k : {"group_size", "has_zero_point", "pre_quant_scale"}) {
    if (f.Has(k)) {
      return Unsupported(f.where() + ": \"" + k + "\" " + f.Dump(k) +
                         " is not supported with quant_algo FP8; accepted: absent");
    }
  }
  f.MarkRead("producer");
  return Status::Ok();
}

std::vector<std::string> Unread(const JsonFields& f, const std::string& prefix) {
  return f.Unread({}, prefix);
}

}  // namespace

const char* CheckpointQuantFormatName(CheckpointQuantFormat f) {
  switch (f) {
    case CheckpointQuantFormat::kCompressedTensors:
      return "compressed-tensors";
    case CheckpointQuantFormat::kModelOpt:
      return "modelopt";
    case CheckpointQuantFormat::kAwq:
      return "awq";
    case CheckpointQuantFormat::kGptq:
      return "gptq";
    case CheckpointQuantFormat::kNone:
      break;
  }
  return "none";
}

Result<CheckpointQuantization> ReadQuantizationConfig(const std::string& text,
                                                      const std::string& where) {
  const json q = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (q.is_discarded() || !q.is_object()) {
    return InvalidArgument(where + " is " + text + ", expected an object");
  }
  const JsonFields f(q, where);
  std::string method;
  RETURN_IF_ERROR(f.String("quant_method", &method));
  CheckpointQuantization out;
  if (method == "compressed-tensors") {
    out.format = CheckpointQuantFormat::kCompressedTensors;
    RETURN_IF_ERROR(ReadCompressedTensors(f, &out));
  } else if (method == "awq") {
    out.format = CheckpointQuantFormat::kAwq;
    RETURN_IF_ERROR(ReadAwq(f, &out));
  } else if (method == "gptq") {
    out.format = CheckpointQuantFormat::kGptq;
    RETURN_IF_ERROR(ReadGptq(f, &out));
  } else if (method == "modelopt") {
    out.format = CheckpointQuantFormat::kModelOpt;
    RETURN_IF_ERROR(ReadModelOptSettings(f, &out));
  } else {
    return Unsupported(where + ": \"quant_method\" \"" + method +
                       "\" is not supported; accepted: compressed-tensors, modelopt, awq, gptq");
  }
  out.engine.source = CheckpointQuantFormatName(out.format);
  RETURN_IF_ERROR(out.engine.Validate());
  out.unread_keys = Unread(f, "quantization_config.");
  return out;
}

Result<CheckpointQuantization> ReadModelOptQuantConfig(const std::string& text,
                                                       const std::string& origin) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(origin + ": not a JSON object");
  const JsonFields top(j, origin);
  const json* producer = top.Get("producer");
  if (producer == nullptr || !producer->is_object() || producer->value("name", "") != "modelopt") {
    return Unsupported(origin + ": \"producer\" " + top.Dump("producer") +
                       " is not supported; accepted: {\"name\": \"modelopt\", ...}");
  }
  const json* quantization = top.Get("quantization");
  if (quantization == nullptr || !quantization->is_object()) {
    return InvalidArgument(origin + ": \"quantization\" is required (an object)");
  }
  const JsonFields f(*quantization, origin + " quantization");
  CheckpointQuantization out;
  out.format = CheckpointQuantFormat::kModelOpt;
  RETURN_IF_ERROR(ReadModelOptSettings(f, &out));
  out.engine.source = "modelopt";
  RETURN_IF_ERROR(out.engine.Validate());
  out.unread_keys = Unread(f, "quantization.");
  return out;
}

}  // namespace inflight::model
