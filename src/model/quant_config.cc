#include "model/quant_config.h"

#include <nlohmann/json.hpp>

#include "model/json_fields.h"

namespace inflight::model {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

template <typename E, std::size_t N>
Status ParseChoice(const JsonFields& f, const char* key, const char* const (&names)[N], E* out) {
  std::string s;
  RETURN_IF_ERROR(f.String(key, &s));
  std::string accepted;
  for (std::size_t i = 0; i < N; ++i) {
    if (s == names[i]) {
      *out = static_cast<E>(i);
      return Status::Ok();
    }
    accepted += (i ? ", " : "") + std::string(names[i]);
  }
  return f.Error(key, "is \"" + s + "\", expected one of: " + accepted);
}

constexpr const char* kAlgoNames[] = {"none", "fp8", "int8_wo", "int4_wo"};
constexpr const char* kGranularityNames[] = {"per_tensor", "per_channel", "per_group"};
constexpr const char* kScalingNames[] = {"none", "dynamic_per_token", "static"};

}  // namespace

const char* QuantAlgoName(QuantAlgo a) {
  return kAlgoNames[static_cast<int>(a)];
}
const char* GranularityName(WeightScaleGranularity g) {
  return kGranularityNames[static_cast<int>(g)];
}
const char* ActivationScalingName(ActivationScaling s) {
  return kScalingNames[static_cast<int>(s)];
}

Result<QuantAlgo> ParseQuantAlgo(std::string_view name, const std::string& what) {
  if (name == "fp8") return QuantAlgo::kFp8;
  if (name == "int8_wo") return QuantAlgo::kInt8Wo;
  if (name == "int4_wo") return QuantAlgo::kInt4Wo;
  if (name == "full_prec" || name == "none") return QuantAlgo::kNone;
  return InvalidArgument(what + " \"" + std::string(name) +
                         "\" is not one of: fp8, int8_wo, int4_wo, full_prec");
}

DType QuantConfig::WeightDType() const {
  switch (quant_algo) {
    case QuantAlgo::kFp8:
      return DType::kFloat8E4M3;
    case QuantAlgo::kInt8Wo:
      return DType::kInt8;
    case QuantAlgo::kInt4Wo:
      return DType::kUInt8;
    case QuantAlgo::kNone:
      break;
  }
  return DType::kFloat32;
}

std::int64_t QuantConfig::PackedColumns(std::int64_t in_features) const {
  return quant_algo == QuantAlgo::kInt4Wo ? in_features / 2 : in_features;
}

std::int64_t QuantConfig::NumGroups(std::int64_t in_features) const {
  if (weight_granularity != WeightScaleGranularity::kPerGroup) return 1;
  return (in_features + group_size - 1) / group_size;
}

Status QuantConfig::Validate() const {
  const std::string algo = QuantAlgoName(quant_algo);
  if (pre_quant_scale) {
    return Unsupported(
        "quantization.pre_quant_scale true is not supported: AWQ smoothing must be "
        "folded into the weights (as AutoAWQ checkpoints have it); accepted: false");
  }
  switch (quant_algo) {
    case QuantAlgo::kNone:
      if (has_zero_point || has_group_index || activation_scaling != ActivationScaling::kNone) {
        return InvalidArgument(
            "quantization: quant_algo \"none\" takes no zero points, group "
            "index or activation scaling");
      }
      return Status::Ok();
    case QuantAlgo::kFp8:
      if (weight_granularity == WeightScaleGranularity::kPerGroup) {
        return Unsupported(
            "quantization.weight_scale_granularity \"per_group\" is not supported "
            "with quant_algo \"fp8\"; accepted: per_tensor, per_channel");
      }
      if (activation_scaling == ActivationScaling::kNone) {
        return InvalidArgument(
            "quantization.activation_scaling \"none\" is not accepted with "
            "quant_algo \"fp8\"; accepted: dynamic_per_token, static");
      }
      if (has_zero_point || has_group_index) {
        return Unsupported(
            "quantization: quant_algo \"fp8\" is symmetric; has_zero_point and "
            "has_group_index must be false");
      }
      return Status::Ok();
    case QuantAlgo::kInt8Wo:
    case QuantAlgo::kInt4Wo:
      if (activation_scaling != ActivationScaling::kNone) {
        return InvalidArgument("quantization.activation_scaling \"" +
                               std::string(ActivationScalingName(activation_scaling)) +
                               "\" is not accepted with quant_algo \"" + algo +
                               "\" (weight-only); accepted: none");
      }
      if (weight_granularity == WeightScaleGranularity::kPerTensor) {
        return Unsupported(
            "quantization.weight_scale_granularity \"per_tensor\" is not supported "
            "with quant_algo \"" +
            algo + "\"; accepted: per_channel, per_group");
      }
      if (weight_granularity == WeightScaleGranularity::kPerGroup && group_size < 2) {
        return InvalidArgument("quantization.group_size " + std::to_string(group_size) +
                               " must be >= 2 with per_group scales");
      }
      if (has_group_index && weight_granularity != WeightScaleGranularity::kPerGroup) {
        return InvalidArgument("quantization.has_group_index true needs per_group scales");
      }
      return Status::Ok();
  }
  return Status::Ok();
}

const char* QuantPartSuffix(QuantPart p) {
  switch (p) {
    case QuantPart::kWeight:
      return "weight";
    case QuantPart::kWeightScale:
      return "weight_scale";
    case QuantPart::kWeightZero:
      return "weight_zero";
    case QuantPart::kGroupIndex:
      return "g_idx";
    case QuantPart::kInputScale:
      return "input_scale";
  }
  return "?";
}

DType QuantPartDType(const QuantConfig& q, QuantPart p) {
  switch (p) {
    case QuantPart::kWeight:
      return q.WeightDType();
    case QuantPart::kWeightZero:
      return q.quant_algo == QuantAlgo::kInt8Wo ? DType::kInt8 : DType::kUInt8;
    case QuantPart::kGroupIndex:
      return DType::kInt32;
    case QuantPart::kWeightScale:
    case QuantPart::kInputScale:
      break;
  }
  return DType::kFloat32;
}

std::vector<std::int64_t> QuantPartShape(const QuantConfig& q, QuantPart p, std::int64_t rows,
                                         std::int64_t cols, std::int64_t num_groups) {
  switch (p) {
    case QuantPart::kWeight:
      return {rows, q.PackedColumns(cols)};
    case QuantPart::kWeightScale:
      if (q.weight_granularity == WeightScaleGranularity::kPerTensor) return {1};
      if (q.weight_granularity == WeightScaleGranularity::kPerChannel) return {rows};
      return {rows, num_groups};
    case QuantPart::kWeightZero:
      if (q.weight_granularity == WeightScaleGranularity::kPerChannel) return {rows};
      return {rows, num_groups};
    case QuantPart::kGroupIndex:
      return {cols};
    case QuantPart::kInputScale:
      return {1};
  }
  return {};
}

std::string QuantConfigToJson(const QuantConfig& q) {
  ojson j;
  j["quant_algo"] =
      q.quant_algo == QuantAlgo::kNone ? ojson(nullptr) : ojson(QuantAlgoName(q.quant_algo));
  j["weight_scale_granularity"] = GranularityName(q.weight_granularity);
  j["group_size"] = q.group_size;
  j["activation_scaling"] = ActivationScalingName(q.activation_scaling);
  j["has_zero_point"] = q.has_zero_point;
  j["has_group_index"] = q.has_group_index;
  j["pre_quant_scale"] = q.pre_quant_scale;
  j["kv_cache_quant_algo"] = q.kv_cache_fp8 ? ojson("fp8") : ojson(nullptr);
  j["exclude_modules"] = q.exclude_modules;
  j["source"] = q.source;
  return j.dump();
}

Result<QuantConfig> QuantConfigFromJson(const std::string& text, const std::string& origin) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(origin + ": expected an object");
  const JsonFields f(j, origin);
  QuantConfig q;
  if (f.Has("quant_algo")) {
    RETURN_IF_ERROR(ParseChoice(f, "quant_algo", kAlgoNames, &q.quant_algo));
  }
  RETURN_IF_ERROR(
      ParseChoice(f, "weight_scale_granularity", kGranularityNames, &q.weight_granularity));
  RETURN_IF_ERROR(f.Int("group_size", &q.group_size));
  RETURN_IF_ERROR(ParseChoice(f, "activation_scaling", kScalingNames, &q.activation_scaling));
  RETURN_IF_ERROR(f.Bool("has_zero_point", &q.has_zero_point));
  RETURN_IF_ERROR(f.Bool("has_group_index", &q.has_group_index));
  RETURN_IF_ERROR(f.Bool("pre_quant_scale", &q.pre_quant_scale));
  if (f.Has("kv_cache_quant_algo")) {
    std::string kv;
    RETURN_IF_ERROR(f.String("kv_cache_quant_algo", &kv));
    if (kv != "fp8")
      return f.Error("kv_cache_quant_algo", "is \"" + kv + "\", expected fp8 or null");
    q.kv_cache_fp8 = true;
  }
  q.exclude_modules.clear();
  if (const json* ex = f.Get("exclude_modules")) {
    if (!ex->is_array())
      return f.Error("exclude_modules", "is " + ex->dump() + ", expected a list");
    for (const json& e : *ex) {
      if (!e.is_string())
        return f.Error("exclude_modules", "holds " + e.dump() + ", expected names");
      q.exclude_modules.push_back(e.get<std::string>());
    }
  }
  RETURN_IF_ERROR(f.String("source", &q.source, /*required=*/false));
  Status st = q.Validate();
  if (!st.ok()) return Status(st.code(), origin + ": " + st.message());
  return q;
}

}  // namespace inflight::model
