#include "model/engine_config.h"

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/logging.h"

namespace inflight::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr const char* kFormatName = "inflight-engine";
constexpr int kFormatVersion = 1;
constexpr const char* kSupportedArchitectures =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel";

std::optional<Architecture> ParseArchitecture(std::string_view name) {
  if (name == "LlamaForCausalLM") return Architecture::kLlama;
  if (name == "MistralForCausalLM") return Architecture::kMistral;
  if (name == "Qwen2ForCausalLM") return Architecture::kQwen2;
  if (name == "GPT2LMHeadModel") return Architecture::kGpt2;
  return std::nullopt;
}

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

// Typed access to one JSON object's fields with errors naming the origin and the field.
class Fields {
 public:
  Fields(const json& obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  bool Has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  const json* Get(const char* key) const { return Has(key) ? &obj_[key] : nullptr; }

  Status Error(const char* key, const std::string& what) const {
    return InvalidArgument(where_ + ": \"" + key + "\" " + what);
  }
  std::string Dump(const char* key) const {
    return obj_.contains(key) ? obj_[key].dump() : "absent";
  }

  Status Int(const char* key, std::int64_t* out, bool required = true) const {
    const json* v = Get(key);
    if (v == nullptr) return required ? Error(key, "is required (an integer)") : Status::Ok();
    if (!v->is_number_integer()) return Error(key, "is " + v->dump() + ", expected an integer");
    *out = v->get<std::int64_t>();
    return Status::Ok();
  }
  Status Int32(const char* key, std::int32_t* out, bool required = true) const {
    std::int64_t v = *out;
    RETURN_IF_ERROR(Int(key, &v, required));
    if (v < INT32_MIN || v > INT32_MAX) {
      return Error(key, "is " + std::to_string(v) + ", outside the 32-bit range");
    }
    *out = static_cast<std::int32_t>(v);
    return Status::Ok();
  }
  Status Float(const char* key, float* out, bool required = true) const {
    const json* v = Get(key);
    if (v == nullptr) return required ? Error(key, "is required (a number)") : Status::Ok();
    if (!v->is_number()) return Error(key, "is " + v->dump() + ", expected a number");
    *out = v->get<float>();
    return Status::Ok();
  }
  Status Bool(const char* key, bool* out, bool required = true) const {
    const json* v = Get(key);
    if (v == nullptr) return required ? Error(key, "is required (true or false)") : Status::Ok();
    if (!v->is_boolean()) return Error(key, "is " + v->dump() + ", expected true or false");
    *out = v->get<bool>();
    return Status::Ok();
  }
  Status String(const char* key, std::string* out, bool required = true) const {
    const json* v = Get(key);
    if (v == nullptr) return required ? Error(key, "is required (a string)") : Status::Ok();
    if (!v->is_string()) return Error(key, "is " + v->dump() + ", expected a string");
    *out = v->get<std::string>();
    return Status::Ok();
  }
  // Token ids: an integer, null, or (HF, e.g. Llama 3.1 Instruct) a list whose first element is
  // taken.
  Status TokenId(const char* key, std::optional<std::int32_t>* out) const {
    const json* v = Get(key);
    if (v == nullptr) return Status::Ok();
    if (v->is_array() && !v->empty()) {
      if (v->size() > 1) {
        LOG_INFO("{}: \"{}\" lists {} ids; using the first, {}", where_, key, v->size(),
                 (*v)[0].dump());
      }
      v = &(*v)[0];
    }
    if (!v->is_number_integer()) return Error(key, "is " + v->dump() + ", expected a token id");
    *out = static_cast<std::int32_t>(v->get<std::int64_t>());
    return Status::Ok();
  }

 private:
  const json& obj_;
  std::string where_;
};

Result<json> ParseObject(const std::string& text, const std::string& origin) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(origin + ": not valid JSON");
  if (!j.is_object()) return InvalidArgument(origin + ": expected a JSON object at the top level");
  return j;
}

Status ParseLlama3Scaling(const Fields& f, const std::string& origin, RopeScaling* out) {
  RETURN_IF_ERROR(f.Float("factor", &out->factor, false));
  RETURN_IF_ERROR(f.Float("low_freq_factor", &out->low_freq_factor, false));
  RETURN_IF_ERROR(f.Float("high_freq_factor", &out->high_freq_factor, false));
  RETURN_IF_ERROR(
      f.Int("original_max_position_embeddings", &out->original_max_position_embeddings, false));
  if (!(out->factor > 0) || !(out->high_freq_factor > out->low_freq_factor) ||
      out->original_max_position_embeddings <= 0) {
    return InvalidArgument(origin +
                           ": rope_scaling llama3 needs factor > 0, high_freq_factor > "
                           "low_freq_factor and original_max_position_embeddings > 0");
  }
  return Status::Ok();
}

// HF's rope_scaling: null, or {"rope_type" (or the older "type"): "llama3", ...}. Only llama3 is
// built.
Status ParseHfRopeScaling(const json& hf, const std::string& origin,
                          std::optional<RopeScaling>* out) {
  if (!hf.contains("rope_scaling") || hf["rope_scaling"].is_null()) return Status::Ok();
  const json& rs = hf["rope_scaling"];
  if (!rs.is_object()) {
    return InvalidArgument(origin + ": \"rope_scaling\" is " + rs.dump() + ", expected an object");
  }
  std::string type;
  const Fields f(rs, origin + " rope_scaling");
  RETURN_IF_ERROR(f.String("rope_type", &type, false));
  if (type.empty()) RETURN_IF_ERROR(f.String("type", &type, false));
  if (type == "default") return Status::Ok();
  if (type != "llama3") {
    return Unsupported(origin + ": rope_scaling type \"" + type +
                       "\" is not supported; supported: llama3 (or no rope_scaling)");
  }
  RopeScaling scaling;
  RETURN_IF_ERROR(ParseLlama3Scaling(f, origin, &scaling));
  *out = scaling;
  return Status::Ok();
}

Status CheckSlidingWindow(const json& hf, const Fields& f, const std::string& origin,
                          const EngineConfig& c) {
  // Qwen2 carries a sliding_window value that only applies when use_sliding_window is true.
  if (hf.contains("use_sliding_window") && hf["use_sliding_window"].is_boolean() &&
      !hf["use_sliding_window"].get<bool>()) {
    return Status::Ok();
  }
  std::int64_t window = 0;
  RETURN_IF_ERROR(f.Int("sliding_window", &window, false));
  if (window == 0) return Status::Ok();
  if (window >= c.max_position_embeddings) {
    LOG_INFO(
        "{}: sliding_window {} >= max_position_embeddings {}: attention is full, window ignored",
        origin, window, c.max_position_embeddings);
    return Status::Ok();
  }
  return Unsupported(origin + ": sliding_window " + std::to_string(window) +
                     " < max_position_embeddings " + std::to_string(c.max_position_embeddings) +
                     ": sliding-window attention is not supported yet");
}

Status FromHfLlamaFamily(const json& hf, const Fields& f, const std::string& origin,
                         EngineConfig* c) {
  RETURN_IF_ERROR(f.Int("vocab_size", &c->vocab_size));
  RETURN_IF_ERROR(f.Int("hidden_size", &c->hidden_size));
  RETURN_IF_ERROR(f.Int("num_hidden_layers", &c->num_layers));
  RETURN_IF_ERROR(f.Int("num_attention_heads", &c->num_attention_heads));
  c->num_kv_heads = c->num_attention_heads;
  RETURN_IF_ERROR(f.Int("num_key_value_heads", &c->num_kv_heads, false));
  RETURN_IF_ERROR(f.Int("intermediate_size", &c->intermediate_size));
  c->norm_eps = 1e-6f;  // HF's default rms_norm_eps for all three
  RETURN_IF_ERROR(f.Float("rms_norm_eps", &c->norm_eps, false));
  c->max_position_embeddings = 2048;
  RETURN_IF_ERROR(f.Int("max_position_embeddings", &c->max_position_embeddings, false));
  c->rope_theta = 10000.0f;
  RETURN_IF_ERROR(f.Float("rope_theta", &c->rope_theta, false));
  RETURN_IF_ERROR(ParseHfRopeScaling(hf, origin, &c->rope_scaling));
  std::string act = "silu";
  RETURN_IF_ERROR(f.String("hidden_act", &act, false));
  if (act != "silu" && act != "swish") {
    return Unsupported(origin + ": hidden_act \"" + act + "\" is not supported; supported: silu");
  }
  c->norm = NormKind::kRmsNorm;
  c->activation = Activation::kSwiGlu;
  c->position_embedding = PositionEmbedding::kRope;
  bool attention_bias = c->architecture == Architecture::kQwen2;
  if (c->architecture == Architecture::kLlama) {
    RETURN_IF_ERROR(f.Bool("attention_bias", &attention_bias, false));
    bool mlp_bias = false;
    RETURN_IF_ERROR(f.Bool("mlp_bias", &mlp_bias, false));
    if (mlp_bias) return Unsupported(origin + ": \"mlp_bias\": true is not supported yet");
  }
  c->qkv_bias = attention_bias;
  c->attn_out_bias = attention_bias && c->architecture == Architecture::kLlama;
  c->tie_word_embeddings = false;
  RETURN_IF_ERROR(f.Bool("tie_word_embeddings", &c->tie_word_embeddings, false));
  if (c->architecture != Architecture::kLlama) {
    RETURN_IF_ERROR(CheckSlidingWindow(hf, f, origin, *c));
  }
  return Status::Ok();
}

Status FromHfGpt2(const Fields& f, const std::string& origin, EngineConfig* c) {
  RETURN_IF_ERROR(f.Int("vocab_size", &c->vocab_size));
  RETURN_IF_ERROR(f.Int("n_embd", &c->hidden_size));
  RETURN_IF_ERROR(f.Int("n_layer", &c->num_layers));
  RETURN_IF_ERROR(f.Int("n_head", &c->num_attention_heads));
  c->num_kv_heads = c->num_attention_heads;
  RETURN_IF_ERROR(f.Int("n_positions", &c->max_position_embeddings));
  c->intermediate_size = 4 * c->hidden_size;
  RETURN_IF_ERROR(f.Int("n_inner", &c->intermediate_size, false));
  c->norm_eps = 1e-5f;
  RETURN_IF_ERROR(f.Float("layer_norm_epsilon", &c->norm_eps, false));
  std::string act = "gelu_new";
  RETURN_IF_ERROR(f.String("activation_function", &act, false));
  // gelu_pytorch_tanh is the same tanh approximation under another name.
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    return Unsupported(origin + ": activation_function \"" + act +
                       "\" is not supported; supported: gelu_new");
  }
  c->norm = NormKind::kLayerNorm;
  c->activation = Activation::kGeluNew;
  c->position_embedding = PositionEmbedding::kLearned;
  c->rope_theta = 10000.0f;
  c->qkv_bias = c->attn_out_bias = c->mlp_bias = c->norm_bias = true;
  c->tie_word_embeddings = true;
  RETURN_IF_ERROR(f.Bool("tie_word_embeddings", &c->tie_word_embeddings, false));
  return Status::Ok();
}

std::string ArchitectureFromModelType(const json& hf) {
  if (!hf.contains("model_type") || !hf["model_type"].is_string()) return "";
  const std::string t = hf["model_type"].get<std::string>();
  if (t == "llama") return "LlamaForCausalLM";
  if (t == "mistral") return "MistralForCausalLM";
  if (t == "qwen2") return "Qwen2ForCausalLM";
  if (t == "gpt2") return "GPT2LMHeadModel";
  return "";
}

Status CheckPositive(const char* name, std::int64_t v) {
  if (v <= 0) {
    return InvalidArgument(std::string("engine config \"") + name + "\" is " + std::to_string(v) +
                           ", must be > 0");
  }
  return Status::Ok();
}

}  // namespace

Status EngineConfig::Validate() const {
  RETURN_IF_ERROR(CheckPositive("vocab_size", vocab_size));
  RETURN_IF_ERROR(CheckPositive("hidden_size", hidden_size));
  RETURN_IF_ERROR(CheckPositive("num_layers", num_layers));
  RETURN_IF_ERROR(CheckPositive("num_attention_heads", num_attention_heads));
  RETURN_IF_ERROR(CheckPositive("num_kv_heads", num_kv_heads));
  RETURN_IF_ERROR(CheckPositive("head_dim", head_dim));
  RETURN_IF_ERROR(CheckPositive("intermediate_size", intermediate_size));
  RETURN_IF_ERROR(CheckPositive("max_position_embeddings", max_position_embeddings));
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return InvalidArgument(std::string("engine config \"dtype\" is ") + DTypeName(dtype) +
                           ", must be one of: float32, float16, bfloat16");
  }
  if (num_attention_heads % num_kv_heads != 0) {
    return InvalidArgument("num_attention_heads " + std::to_string(num_attention_heads) +
                           " is not a multiple of num_kv_heads " + std::to_string(num_kv_heads));
  }
  if (position_embedding == PositionEmbedding::kRope && head_dim % 2 != 0) {
    return InvalidArgument("head_dim " + std::to_string(head_dim) + " must be even for rope");
  }
  if (!(norm_eps > 0))
    return InvalidArgument("norm_eps must be > 0, got " + std::to_string(norm_eps));
  if (!(rope_theta > 0)) {
    return InvalidArgument("rope_theta must be > 0, got " + std::to_string(rope_theta));
  }
  if (!attention_windows.empty()) {
    if (static_cast<std::int64_t>(attention_windows.size()) != num_layers) {
      return InvalidArgument("attention_windows lists " + std::to_string(attention_windows.size()) +
                             " layers, the engine has num_layers " + std::to_string(num_layers));
    }
    for (std::size_t i = 0; i < attention_windows.size(); ++i) {
      if (attention_windows[i] < 0) {
        return InvalidArgument("attention_windows[" + std::to_string(i) + "] is " +
                               std::to_string(attention_windows[i]) +
                               ", must be >= 0 (0: full attention)");
      }
    }
  }
  if (tp_size < 1) return InvalidArgument("tp_size " + std::to_string(tp_size) + " must be >= 1");
  if (pp_size != 1) {
    return Unsupported("pp_size " + std::to_string(pp_size) +
                       " is not supported: pipeline parallelism accepts only 1");
  }
  const std::string tp = "tp_size " + std::to_string(tp_size);
  if (num_attention_heads % tp_size != 0) {
    return InvalidArgument(tp + " does not divide num_attention_heads " +
                           std::to_string(num_attention_heads));
  }
  if (num_kv_heads >= tp_size ? num_kv_heads % tp_size != 0 : tp_size % num_kv_heads != 0) {
    return InvalidArgument(tp + " and num_kv_heads " + std::to_string(num_kv_heads) +
                           ": one must divide the other (kv heads are split or replicated)");
  }
  if (intermediate_size % tp_size != 0) {
    return InvalidArgument(tp + " does not divide intermediate_size " +
                           std::to_string(intermediate_size));
  }
  const BuildLimits& b = build;
  auto limit = [](const char* name, std::int64_t v, std::int64_t lo, std::int64_t hi) -> Status {
    if (v < lo || v > hi) {
      return InvalidArgument(std::string(name) + " " + std::to_string(v) + " is outside [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(limit("max_batch_size", b.max_batch_size, 1, 1 << 20));
  RETURN_IF_ERROR(limit("max_input_len", b.max_input_len, 1, INT32_MAX));
  RETURN_IF_ERROR(limit("max_seq_len", b.max_seq_len, b.max_input_len, INT32_MAX));
  RETURN_IF_ERROR(limit("max_num_tokens", b.max_num_tokens, 1, INT32_MAX));
  RETURN_IF_ERROR(limit("tokens_per_block", b.tokens_per_block, 1, 1024));
  if ((b.tokens_per_block & (b.tokens_per_block - 1)) != 0) {
    return InvalidArgument("tokens_per_block " + std::to_string(b.tokens_per_block) +
                           " is not a power of two");
  }
  if (position_embedding == PositionEmbedding::kLearned &&
      b.max_seq_len > max_position_embeddings) {
    return InvalidArgument(
        "max_seq_len " + std::to_string(b.max_seq_len) + " exceeds max_position_embeddings " +
        std::to_string(max_position_embeddings) + " of a model with learned positions");
  }
  return Status::Ok();
}

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
  j["rope_theta"] = FloatForJson(c.rope_theta);
  if (c.rope_scaling) {
    j["rope_scaling"] = {
        {"type", "llama3"},
        {"factor", FloatForJson(c.rope_scaling->factor)},
        {"low_freq_factor", FloatForJson(c.rope_scaling->low_freq_factor)},
        {"high_freq_factor", FloatForJson(c.rope_scaling->high_freq_factor)},
        {"original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
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
  return j.dump(2) + "\n";
}

Result<EngineConfig> EngineConfigFromJson(const std::string& json_text, const std::string& origin) {
  ASSIGN_OR_RETURN(json j, ParseObject(json_text, origin));
  const Fields f(j, origin);
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
  if (version != kFormatVersion) {
    return Unsupported(origin + ": engine format version " + std::to_string(version) +
                       " is not supported; this build reads version " +
                       std::to_string(kFormatVersion) + " (rebuild the engine)");
  }
  RETURN_IF_ERROR(f.String("architecture", &c.architecture_name));
  const auto arch = ParseArchitecture(c.architecture_name);
  if (!arch) {
    return Unsupported(origin + ": architecture \"" + c.architecture_name +
                       "\" is not one of: " + kSupportedArchitectures);
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
  RETURN_IF_ERROR(f.Float("rope_theta", &c.rope_theta));
  if (const json* rs = f.Get("rope_scaling")) {
    if (!rs->is_object())
      return f.Error("rope_scaling", "is " + rs->dump() + ", expected null or an object");
    const Fields rf(*rs, origin + " rope_scaling");
    RETURN_IF_ERROR(rf.String("type", &s));
    if (s != "llama3") return rf.Error("type", "is \"" + s + "\", expected \"llama3\"");
    RopeScaling scaling;
    RETURN_IF_ERROR(ParseLlama3Scaling(rf, origin, &scaling));
    c.rope_scaling = scaling;
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
  const Fields bf(*build, origin + " build");
  RETURN_IF_ERROR(bf.Int32("max_batch_size", &c.build.max_batch_size));
  RETURN_IF_ERROR(bf.Int32("max_input_len", &c.build.max_input_len));
  RETURN_IF_ERROR(bf.Int32("max_seq_len", &c.build.max_seq_len));
  RETURN_IF_ERROR(bf.Int32("max_num_tokens", &c.build.max_num_tokens));
  RETURN_IF_ERROR(bf.Int32("tokens_per_block", &c.build.tokens_per_block));
  const json* parallel = f.Get("parallel");
  if (parallel == nullptr || !parallel->is_object()) {
    return f.Error("parallel", "is required (an object)");
  }
  const Fields pf(*parallel, origin + " parallel");
  RETURN_IF_ERROR(pf.Int32("tp_size", &c.tp_size));
  RETURN_IF_ERROR(pf.Int32("pp_size", &c.pp_size));
  Status st = c.Validate();
  if (!st.ok()) return Status(st.code(), origin + ": " + st.message());
  return c;
}

Result<EngineConfig> LoadEngineConfig(const std::string& engine_dir) {
  const fs::path path = fs::path(engine_dir) / "config.json";
  std::ifstream in(path);
  if (!in) {
    return NotFound("engine config " + path.string() +
                    " not found (engine_dir must hold the output of inflight-build)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return EngineConfigFromJson(ss.str(), path.string());
}

Status SaveEngineConfig(const EngineConfig& config, const std::string& engine_dir) {
  RETURN_IF_ERROR(config.Validate());
  const fs::path path = fs::path(engine_dir) / "config.json";
  const fs::path tmp = fs::path(engine_dir) / "config.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << EngineConfigToJson(config);
    out.close();
    if (!out) return Internal("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return Internal("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  return Status::Ok();
}

Result<EngineConfig> EngineConfigFromHuggingFace(const std::string& hf_config_json_text,
                                                 const std::string& origin) {
  ASSIGN_OR_RETURN(json hf, ParseObject(hf_config_json_text, origin));
  const Fields f(hf, origin);
  EngineConfig c;
  if (const json* archs = f.Get("architectures")) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      return f.Error("architectures", "is " + archs->dump() + ", expected a list of names");
    }
    c.architecture_name = (*archs)[0].get<std::string>();
  } else {
    c.architecture_name = ArchitectureFromModelType(hf);
    if (c.architecture_name.empty()) {
      return InvalidArgument(origin + ": no \"architectures\" list, and \"model_type\" " +
                             f.Dump("model_type") + " is not one of: llama, mistral, qwen2, gpt2");
    }
  }
  const auto arch = ParseArchitecture(c.architecture_name);
  if (!arch) {
    return Unsupported("Unsupported architecture \"" + c.architecture_name + "\" in " + origin +
                       ": supported are " + kSupportedArchitectures);
  }
  c.architecture = *arch;
  if (c.architecture == Architecture::kGpt2) {
    RETURN_IF_ERROR(FromHfGpt2(f, origin, &c));
  } else {
    RETURN_IF_ERROR(FromHfLlamaFamily(hf, f, origin, &c));
  }
  if (c.num_attention_heads <= 0) {
    return InvalidArgument(origin + ": number of attention heads " +
                           std::to_string(c.num_attention_heads) + " must be > 0");
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  if (c.architecture != Architecture::kGpt2) RETURN_IF_ERROR(f.Int("head_dim", &c.head_dim, false));
  if (!f.Has("head_dim") && c.hidden_size % c.num_attention_heads != 0) {
    return InvalidArgument(origin + ": hidden size " + std::to_string(c.hidden_size) +
                           " is not a multiple of the number of heads " +
                           std::to_string(c.num_attention_heads) + " and there is no head_dim");
  }
  RETURN_IF_ERROR(f.TokenId("bos_token_id", &c.bos_token_id));
  RETURN_IF_ERROR(f.TokenId("eos_token_id", &c.eos_token_id));
  // Newer transformers write "dtype", older ones "torch_dtype"; the builder's default is float16.
  std::string dtype_name;
  RETURN_IF_ERROR(f.String("torch_dtype", &dtype_name, false));
  if (dtype_name.empty()) RETURN_IF_ERROR(f.String("dtype", &dtype_name, false));
  c.dtype = DType::kFloat16;
  if (!dtype_name.empty()) {
    const auto d = ParseDType(dtype_name);
    if (d && (*d == DType::kFloat32 || *d == DType::kFloat16 || *d == DType::kBFloat16)) {
      c.dtype = *d;
    } else {
      LOG_WARN("{}: torch_dtype \"{}\" is not float32/float16/bfloat16; defaulting to float16",
               origin, dtype_name);
    }
  }
  c.build.max_seq_len = static_cast<std::int32_t>(
      std::min<std::int64_t>(c.max_position_embeddings, c.build.max_seq_len));
  c.build.max_input_len = std::min(c.build.max_input_len, c.build.max_seq_len);
  Status st = c.Validate();
  if (!st.ok()) return Status(st.code(), origin + ": " + st.message());
  return c;
}

}  // namespace inflight::model
