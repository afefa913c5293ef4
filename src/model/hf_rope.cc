// RoPE settings of a Hugging Face config.json, in the 4.x layout (top-level rope_theta,
// rope_scaling with "type" or "rope_type") and the 5.x layout (rope_parameters holding rope_type
// and rope_theta). Precedence and defaults follow transformers 5's RotaryEmbeddingConfigMixin
// (modeling_rope_utils.py: convert_rope_params_to_dict, standardize_rope_params) and the
// _compute_*_parameters functions, so a 4.x file means what transformers 5 makes of it.
#include <set>

#include "model/hf_config_readers.h"

namespace inflight::model {
namespace {

using json = nlohmann::json;

// transformers' layer type names (configuration_utils.py ALLOWED_LAYER_TYPES): keys of a
// per-layer-type rope_parameters object.
const std::set<std::string> kLayerTypeNames = {"full_attention", "sliding_attention",
                                               "chunked_attention", "linear_attention"};

bool IsPerLayerType(const json& obj) {
  if (obj.empty()) return false;
  for (const auto& [key, value] : obj.items()) {
    if (!value.is_object() || kLayerTypeNames.count(key) == 0) return false;
  }
  return true;
}

// A number the type needs: absent (or null, unless null_ok) is an error naming it, as transformers'
// rope_parameters_dict["..."] fails on a missing key.
Status Required(const JsonFields& r, const char* key, const std::string& type, double* out) {
  if (!r.Has(key)) {
    return r.Error(key, "is required for rope_type \"" + type + "\" (a number)");
  }
  return r.Double(key, out);
}

// Either place may hold it (transformers 5 moves it into rope_parameters); only 1.0 is accepted.
Status CheckPartialRotary(const JsonFields& fields) {
  const json* p = fields.Get("partial_rotary_factor");
  if (p == nullptr) return Status::Ok();
  if (!p->is_number() || p->get<double>() != 1.0) {
    return Unsupported(fields.where() + ": \"partial_rotary_factor\" " + p->dump() +
                       " is not supported; supported: 1.0 (these models rotate the whole head)");
  }
  return Status::Ok();
}

// A per-layer-type rope object ({"full_attention": {...}, "sliding_attention": {...}}): one
// RoPE when every layer type the model's layers use has the same entry (the engine computes one
// RoPE for all layers), else refused. Models without layer_types (Llama, Mistral) read one flat
// object, so for them it is refused outright.
Result<std::pair<const json*, std::string>> OneRopeOfLayerTypes(const JsonFields& f,
                                                                const char* name, const json& obj,
                                                                const EngineConfig& c,
                                                                std::vector<std::string>* unread) {
  std::string keys;
  for (const auto& [key, value] : obj.items()) keys += (keys.empty() ? "" : ", ") + key;
  if (c.architecture != Architecture::kQwen2 && c.architecture != Architecture::kQwen3) {
    return Unsupported(f.where() + ": \"" + name + "\" is per layer type (" + keys + "); " +
                       c.architecture_name +
                       " reads one flat object ({\"rope_type\": ..., \"rope_theta\": ...})");
  }
  // The layer types in use, from attention_windows (read before the rope): 0 is full attention.
  std::set<std::string> used;
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    used.insert(c.AttentionWindow(i) == 0 ? "full_attention" : "sliding_attention");
  }
  const json* chosen = nullptr;
  std::string chosen_type;
  for (const std::string& type : used) {
    if (!obj.contains(type)) {
      return Unsupported(f.where() + ": \"" + name + "\" is per layer type (" + keys +
                         ") and has no entry for \"" + type + "\", which layers use");
    }
    if (chosen != nullptr && obj[type] != *chosen) {
      return Unsupported(f.where() + ": \"" + name + "\" gives full_attention and " +
                         "sliding_attention layers different RoPE (" + obj.dump() +
                         "); supported: one RoPE for every layer");
    }
    chosen = &obj[type];
    chosen_type = type;
  }
  for (const auto& [key, value] : obj.items()) {
    if (used.count(key) == 0) unread->push_back(std::string(name) + "." + key);
  }
  return std::pair{chosen, chosen_type};
}

}  // namespace

Status ReadHfRope(const JsonFields& f, const EngineConfig& c, RopeConfig* rope,
                  std::vector<std::string>* unread) {
  *rope = RopeConfig{};
  // convert_rope_params_to_dict: `self.rope_parameters = rope_scaling or self.rope_parameters`.
  const char* name = nullptr;
  if (f.object().contains("rope_scaling") && !f.object()["rope_scaling"].is_null() &&
      !(f.object()["rope_scaling"].is_object() && f.object()["rope_scaling"].empty())) {
    name = "rope_scaling";
  } else if (f.object().contains("rope_parameters") && !f.object()["rope_parameters"].is_null()) {
    name = "rope_parameters";
  }
  // rope_parameters, when a rope_scaling beats it, is left unread: listed in the build log.
  f.MarkRead("rope_scaling");
  if (name == nullptr || std::string(name) == "rope_parameters") f.MarkRead("rope_parameters");
  const json empty = json::object();
  const json* obj = &empty;
  std::string layer_type;  // the entry of a per-layer-type object that was read
  if (name != nullptr) {
    obj = f.Get(name);
    if (!obj->is_object()) return f.Error(name, "is " + obj->dump() + ", expected an object");
    if (IsPerLayerType(*obj)) {
      ASSIGN_OR_RETURN(const auto entry, OneRopeOfLayerTypes(f, name, *obj, c, unread));
      obj = entry.first;
      layer_type = entry.second;
    }
  }
  const std::string inside =
      name == nullptr ? "rope" : std::string(name) + (layer_type.empty() ? "" : "." + layer_type);
  const JsonFields r(*obj, f.where() + " " + inside);

  // rope_theta: the object's own wins (setdefault), then the top-level key, then 10000.
  RETURN_IF_ERROR(f.Double("rope_theta", &rope->theta, false));
  RETURN_IF_ERROR(r.Double("rope_theta", &rope->theta, false));
  RETURN_IF_ERROR(CheckPartialRotary(r));
  RETURN_IF_ERROR(CheckPartialRotary(f));

  // standardize_rope_params: rope_parameters.setdefault("rope_type", get("type", "default")).
  std::string type = "default";
  RETURN_IF_ERROR(r.String("type", &type, false));
  RETURN_IF_ERROR(r.String("rope_type", &type, false));
  const auto parsed = ParseRopeType(type);
  if (!parsed) {
    return Unsupported(r.where() + " rope_type \"" + type +
                       "\" is not supported; supported: " + SupportedRopeTypes());
  }
  rope->type = *parsed;

  if (rope->type == RopeType::kLlama3 || rope->type == RopeType::kYarn) {
    // standardize_rope_params: a top-level original_max_position_embeddings (Phi-3's layout) wins
    // over the object's; else the object's; else max_position_embeddings.
    rope->original_max_position_embeddings = c.max_position_embeddings;
    RETURN_IF_ERROR(
        r.Int("original_max_position_embeddings", &rope->original_max_position_embeddings, false));
    RETURN_IF_ERROR(
        f.Int("original_max_position_embeddings", &rope->original_max_position_embeddings, false));
  }
  switch (rope->type) {
    case RopeType::kDefault:
      break;
    case RopeType::kLinear:
      RETURN_IF_ERROR(Required(r, "factor", type, &rope->factor));
      break;
    case RopeType::kDynamic:
      RETURN_IF_ERROR(Required(r, "factor", type, &rope->factor));
      // _compute_dynamic_ntk_parameters grows theta past config.max_position_embeddings; the
      // object's original_max_position_embeddings is not read for this type.
      rope->original_max_position_embeddings = c.max_position_embeddings;
      break;
    case RopeType::kLlama3:
      RETURN_IF_ERROR(Required(r, "factor", type, &rope->factor));
      RETURN_IF_ERROR(Required(r, "low_freq_factor", type, &rope->low_freq_factor));
      RETURN_IF_ERROR(Required(r, "high_freq_factor", type, &rope->high_freq_factor));
      break;
    case RopeType::kYarn: {
      // _compute_yarn_parameters: `factor` must be present; null means
      // max_position_embeddings / original_max_position_embeddings.
      if (!r.Present("factor")) {
        return r.Error("factor", "is required for rope_type \"yarn\" (a number, or null)");
      }
      rope->factor = static_cast<double>(c.max_position_embeddings) /
                     static_cast<double>(rope->original_max_position_embeddings);
      RETURN_IF_ERROR(r.Double("factor", &rope->factor, false));
      // `rope_parameters_dict.get("beta_fast") or 32`: null and 0 take the default.
      double beta = 0;
      RETURN_IF_ERROR(r.Double("beta_fast", &beta, false));
      if (beta != 0) rope->beta_fast = beta;
      beta = 0;
      RETURN_IF_ERROR(r.Double("beta_slow", &beta, false));
      if (beta != 0) rope->beta_slow = beta;
      for (auto [key, out] :
           {std::pair{"mscale", &rope->mscale}, {"mscale_all_dim", &rope->mscale_all_dim}}) {
        if (r.Has(key)) {
          double v = 0;
          RETURN_IF_ERROR(r.Double(key, &v));
          *out = v;
        }
      }
      // `rope_parameters.get("truncate", True)`: an explicit null is falsy.
      if (r.Present("truncate")) {
        rope->truncate = false;
        RETURN_IF_ERROR(r.Bool("truncate", &rope->truncate, false));
      }
      if (r.Has("attention_factor")) {
        RETURN_IF_ERROR(r.Double("attention_factor", &rope->attention_factor));
      } else {
        rope->attention_factor =
            YarnAttentionFactor(rope->factor, rope->mscale, rope->mscale_all_dim);
      }
      break;
    }
  }
  if (name != nullptr) {
    const std::vector<std::string> rest = r.Unread({}, inside + ".");
    unread->insert(unread->end(), rest.begin(), rest.end());
  }
  return ValidateRopeConfig(*rope, c.head_dim, f.where());
}

}  // namespace inflight::model
