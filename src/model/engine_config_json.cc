// The engine's config.json (docs/engine_format.md): version 2 written, versions 1 and 2 read.
#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "model/engine_config.h"
#include "model/json_fields.h"

namespace inflight::model {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr const char* kFormatName = "inflight-engine";
// Version 2 replaced rope_theta / rope_scaling (llama3 only) with the "rope" object.
constexpr int kFormatVersion = 2;

const char* NormName(NormKind n) {
  return n == NormKind::kRmsNorm ? "rmsnorm" : "layernorm";
}
const char* ActivationName(Activation a) {
  return a == Activation::kSwiGlu ? "swiglu" : "gelu_new";
}
const char* PositionName(PositionEmbedding p) {
  return p == PositionEmbedding::kRope ? "rope" : "learned";
}

// A float written through its shortest decimal form, so 1e-5f appears as 1e-05 rather than
// 9.999999747378752e-06 in config.json.
double FloatForJson(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf) - 1, f);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

ojson OptionalNumber(const std::optional<double>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}

// The "rope" object: the type, theta and attention_factor, then the fields the type reads.
ojson RopeToJson(const RopeConfig& r) {
  ojson j;
  j["type"] = RopeTypeName(r.type);
  j["theta"] = r.theta;
  if (RopeReadsFactor(r.type)) j["factor"] = r.factor;
  if (r.type == RopeType::kLlama3) {
    j["low_freq_factor"] = r.low_freq_factor;
    j["high_freq_factor"] = r.high_freq_factor;
  }
  if (RopeReadsOriginalLength(r.type)) {
    j["original_max_position_embeddings"] = r.original_max_position_embeddings;
  }
  if (r.type == RopeType::kYarn) {
    j["beta_fast"] = r.beta_fast;
    j["beta_slow"] = r.beta_slow;
    j["mscale"] = OptionalNumber(r.mscale);
    j["mscale_all_dim"] = OptionalNumber(r.mscale_all_dim);
    j["truncate"] = r.truncate;
  }
  j["attention_factor"] = r.attention_factor;
  return j;
}

Status RopeFromJson(const JsonFields& f, RopeConfig* r) {
  std::string type;
  RETURN_IF_ERROR(f.String("type", &type));
  const auto parsed = ParseRopeType(type);
  if (!parsed) {
    return f.Error("type", "is \"" + type + "\", expected one of: " + SupportedRopeTypes());
  }
  r->type = *parsed;
  RETURN_IF_ERROR(f.Double("theta", &r->theta));
  RETURN_IF_ERROR(f.Double("attention_factor", &r->attention_factor));
  if (RopeReadsFactor(r->type)) RETURN_IF_ERROR(f.Double("factor", &r->factor));
  if (r->type == RopeType::kLlama3) {
    RETURN_IF_ERROR(f.Double("low_freq_factor", &r->low_freq_factor));
    RETURN_IF_ERROR(f.Double("high_freq_factor", &r->high_freq_factor));
  }
  if (RopeReadsOriginalLength(r->type)) {
    RETURN_IF_ERROR(
        f.Int("original_max_position_embeddings", &r->original_max_position_embeddings));
  }
  if (r->type == RopeType::kYarn) {
    RETURN_IF_ERROR(f.Double("beta_fast", &r->beta_fast));
    RETURN_IF_ERROR(f.Double("beta_slow", &r->beta_slow));
    RETURN_IF_ERROR(f.Bool("truncate", &r->truncate));
    for (auto [key, out] :
         {std::pair{"mscale", &r->mscale}, {"mscale_all_dim", &r->mscale_all_dim}}) {
      double v = 0;
      if (f.Has(key)) {
        RETURN_IF_ERROR(f.Double(key, &v));
        *out = v;
      }
    }
  }
  return Status::Ok();
}

// Version 1: rope_theta and rope_scaling (null, or {"type": "llama3", ...}).
Status RopeFromVersion1(const JsonFields& f, const std::string& origin, RopeConfig* r) {
  RETURN_IF_ERROR(f.Double("rope_theta", &r->theta));
  const json* rs = f.Get("rope_scaling");
  if (rs == nullptr) return Status::Ok();
  if (!rs->is_object()) {
    return f.Error("rope_scaling", "is " + rs->dump() + ", expected null or an object");
  }
  const JsonFields rf(*rs, origin + " rope_scaling");
  std::string type;
  RETURN_IF_ERROR(rf.String("type", &type));
  if (type != "llama3") return rf.Error("type", "is \"" + type + "\", expected \"llama3\"");
  r->type = RopeType::kLlama3;
  RETURN_IF_ERROR(rf.Double("factor", &r->factor));
  RETURN_IF_ERROR(rf.Double("low_freq_factor", &r->low_freq_factor));
  RETURN_IF_ERROR(rf.Double("high_freq_factor", &r->high_freq_factor));
  return rf.Int("original_max_position_embeddings", &r->original_max_position_embeddings);
}

Result<json> ParseObject(const std::string& text, const std::string& origin) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(origin + ": not valid JSON");
  if (!j.is_object()) return InvalidArgument(origin + ": expected a JSON object at the top level");
  return j;
}

}  // namespace

std::string EngineConfigToJson(const EngineConfig& c) {
  ojson j;
  j["format"] = kFormatName;
  j["version"] = kFormatVersion;
  j["architecture"] = c.architecture_name;
  j["dtype"] = DTypeName(c.dtype);
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_kv_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["intermediate_size"] = c.intermediate_size;
  j["norm"] = NormName(c.norm);
  j["norm_eps"] = FloatForJson(c.norm_eps);
  j["activation"] = ActivationName(c.activation);
  j["position_embedding"] = PositionName(c.position_embedding);
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rope"] =
      c.position_embedding == PositionEmbedding::kRope ? RopeToJson(c.rope) : ojson(nullptr);
  j["qkv_bias"] = c.qkv_bias;
  j["attn_out_bias"] = c.attn_out_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["norm_bias"] = c.norm_bias;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["qk_norm"] = c.qk_norm;
  j["attention_windows"] = c.attention_windows;
  j["bos_token_id"] = c.bos_token_id ? ojson(*c.bos_token_id) : ojson(nullptr);
  j["eos_token_id"] = c.eos_token_id ? ojson(*c.eos_token_id) : ojson(nullptr);
  j["build"] = {{"max_batch_size", c.build.max_batch_size},
                {"max_input_len", c.build.max_input_len},
                {"max_seq_len", c.build.max_seq_len},
                {"max_num_tokens", c.build.max_num_tokens},
                {"tokens_per_block", c.build.tokens_per_block}};
  j["parallel"] = {{"tp_size", c.tp_size}, {"pp_size", c.pp_size}};
  // Written only for quantized engines, so the config.json of a float engine is unchanged.
  if (c.quant.any()) j["quantization"] = ojson::parse(QuantConfigToJson(c.quant));
  if (c.random_weights) {
    j["random_weights"] = {{"preset", c.random_weights->preset},
                           {"seed", static_cast<std::int64_t>(c.random_weights->seed)}};
  }
  return j.dump(2) + "\n";
}

Result<EngineConfig> EngineConfigFromJson(const std::string& json_text, const std::string& origin) {
  ASSIGN_OR_RETURN(json j, ParseObject(json_text, origin));
  const JsonFields f(j, origin);
  EngineConfig c;
  std::string format;
  RETURN_IF_ERROR(f.String("format", &format));
  if (format != kFormatName) {
    return InvalidArgument(origin + ": \"format\" is \"" + format + "\", expected \"" +
                           kFormatName + "\" (is this a Hugging Face config? build it with " +
                           "inflight-build)");
  }
  std::int64_t version = 0;
  RETURN_IF_ERROR(f.Int("version", &version));
  if (version != 1 && version != kFormatVersion) {
    return Unsupported(origin + ": engine format version " + std::to_string(version) +
                       " is not supported; this build reads versions 1 and " +
                       std::to_string(kFormatVersion) + " (rebuild the engine)");
  }
  RETURN_IF_ERROR(f.String("architecture", &c.architecture_name));
  const auto arch = ParseArchitecture(c.architecture_name);
  if (!arch) {
    return Unsupported(origin + ": architecture \"" + c.architecture_name +
                       "\" is not one of: " + SupportedArchitectures());
  }
  c.architecture = *arch;
  std::string s;
  RETURN_IF_ERROR(f.String("dtype", &s));
  const auto dtype = ParseDType(s);
  if (!dtype ||
      (*dtype != DType::kFloat32 && *dtype != DType::kFloat16 && *dtype != DType::kBFloat16)) {
    return f.Error("dtype", "is \"" + s + "\", expected one of: float32, float16, bfloat16");
  }
  c.dtype = *dtype;
  RETURN_IF_ERROR(f.Int("vocab_size", &c.vocab_size));
  RETURN_IF_ERROR(f.Int("hidden_size", &c.hidden_size));
  RETURN_IF_ERROR(f.Int("num_layers", &c.num_layers));
  RETURN_IF_ERROR(f.Int("num_attention_heads", &c.num_attention_heads));
  RETURN_IF_ERROR(f.Int("num_kv_heads", &c.num_kv_heads));
  RETURN_IF_ERROR(f.Int("head_dim", &c.head_dim));
  RETURN_IF_ERROR(f.Int("intermediate_size", &c.intermediate_size));
  RETURN_IF_ERROR(f.String("norm", &s));
  if (s != "rmsnorm" && s != "layernorm") {
    return f.Error("norm", "is \"" + s + "\", expected one of: rmsnorm, layernorm");
  }
  c.norm = s == "rmsnorm" ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  RETURN_IF_ERROR(f.Float("norm_eps", &c.norm_eps));
  RETURN_IF_ERROR(f.String("activation", &s));
  if (s != "swiglu" && s != "gelu_new") {
    return f.Error("activation", "is \"" + s + "\", expected one of: swiglu, gelu_new");
  }
  c.activation = s == "swiglu" ? Activation::kSwiGlu : Activation::kGeluNew;
  RETURN_IF_ERROR(f.String("position_embedding", &s));
  if (s != "rope" && s != "learned") {
    return f.Error("position_embedding", "is \"" + s + "\", expected one of: rope, learned");
  }
  c.position_embedding = s == "rope" ? PositionEmbedding::kRope : PositionEmbedding::kLearned;
  RETURN_IF_ERROR(f.Int("max_position_embeddings", &c.max_position_embeddings));
  if (version == 1) {
    RETURN_IF_ERROR(RopeFromVersion1(f, origin, &c.rope));
  } else if (c.position_embedding == PositionEmbedding::kRope) {
    const json* rope = f.Get("rope");
    if (rope == nullptr || !rope->is_object()) {
      return f.Error("rope", "is " + f.Dump("rope") + ", expected an object for rope engines");
    }
    RETURN_IF_ERROR(RopeFromJson(JsonFields(*rope, origin + " rope"), &c.rope));
  }
  RETURN_IF_ERROR(f.Bool("qkv_bias", &c.qkv_bias));
  RETURN_IF_ERROR(f.Bool("attn_out_bias", &c.attn_out_bias));
  RETURN_IF_ERROR(f.Bool("mlp_bias", &c.mlp_bias));
  RETURN_IF_ERROR(f.Bool("norm_bias", &c.norm_bias));
  RETURN_IF_ERROR(f.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  RETURN_IF_ERROR(f.Bool("qk_norm", &c.qk_norm, /*required=*/false));
  if (const json* w = f.Get("attention_windows")) {
    if (!w->is_array()) {
      return f.Error("attention_windows", "is " + w->dump() + ", expected a list of integers");
    }
    for (const json& e : *w) {
      if (!e.is_number_integer()) {
        return f.Error("attention_windows", "holds " + e.dump() + ", expected integers");
      }
      c.attention_windows.push_back(e.get<std::int64_t>());
    }
  }
  RETURN_IF_ERROR(f.TokenId("bos_token_id", &c.bos_token_id));
  RETURN_IF_ERROR(f.TokenId("eos_token_id", &c.eos_token_id));
  const json* build = f.Get("build");
  if (build == nullptr || !build->is_object()) return f.Error("build", "is required (an object)");
  const JsonFields bf(*build, origin + " build");
  RETURN_IF_ERROR(bf.Int32("max_batch_size", &c.build.max_batch_size));
  RETURN_IF_ERROR(bf.Int32("max_input_len", &c.build.max_input_len));
  RETURN_IF_ERROR(bf.Int32("max_seq_len", &c.build.max_seq_len));
  RETURN_IF_ERROR(bf.Int32("max_num_tokens", &c.build.max_num_tokens));
  RETURN_IF_ERROR(bf.Int32("tokens_per_block", &c.build.tokens_per_block));
  const json* parallel = f.Get("parallel");
  if (parallel == nullptr || !parallel->is_object()) {
    return f.Error("parallel", "is required (an object)");
  }
  const JsonFields pf(*parallel, origin + " parallel");
  RETURN_IF_ERROR(pf.Int32("tp_size", &c.tp_size));
  RETURN_IF_ERROR(pf.Int32("pp_size", &c.pp_size));
  if (const json* quant = f.Get("quantization")) {
    ASSIGN_OR_RETURN(c.quant, QuantConfigFromJson(quant->dump(), origin + " quantization"));
  }
  if (const json* random = f.Get("random_weights")) {
    if (!random->is_object()) {
      return f.Error("random_weights", "is " + random->dump() + ", expected an object");
    }
    const JsonFields rf(*random, origin + " random_weights");
    RandomWeightsRecipe recipe;
    RETURN_IF_ERROR(rf.String("preset", &recipe.preset));
    std::int64_t seed = 0;
    RETURN_IF_ERROR(rf.Int("seed", &seed));
    if (seed < 0) return rf.Error("seed", "is " + std::to_string(seed) + ", expected >= 0");
    recipe.seed = static_cast<std::uint64_t>(seed);
    c.random_weights = std::move(recipe);
  }
  Status st = c.Validate();
  if (!st.ok()) return Status(st.code(), origin + ": " + st.message());
  return c;
}

}  // namespace inflight::model
