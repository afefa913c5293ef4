// Llama, Mistral, Qwen2 and Qwen3 config.json → EngineConfig. Defaults are the config classes' of
// transformers 5 (models/{llama,mistral,qwen2,qwen3}/configuration_*.py); what each model reads is
// from its modeling_*.py (the same in transformers 4.45+ unless a comment says otherwise).
#include "model/hf_config_readers.h"

namespace inflight::model {
namespace {

using json = nlohmann::json;

// What a config class assumes for a key that config.json leaves out.
struct FamilyDefaults {
  std::int64_t max_position_embeddings;
  std::optional<std::int64_t> num_kv_heads;  // nullopt: num_attention_heads
  std::optional<std::int64_t> head_dim;      // nullopt: hidden_size / num_attention_heads
};

FamilyDefaults DefaultsOf(Architecture a) {
  switch (a) {
    case Architecture::kMistral:  // MistralConfig: 4096 * 32 positions, 8 kv heads
      return {131072, 8, std::nullopt};
    case Architecture::kQwen2:  // Qwen2Config
      return {32768, 32, std::nullopt};
    case Architecture::kQwen3:  // Qwen3Config: head_dim 128 whatever the hidden size
      return {32768, 32, 128};
    default:  // LlamaConfig
      return {2048, std::nullopt, std::nullopt};
  }
}

Status ReadHeads(const JsonFields& f, const FamilyDefaults& d, EngineConfig* c) {
  RETURN_IF_ERROR(f.Int("hidden_size", &c->hidden_size));
  RETURN_IF_ERROR(f.Int("num_hidden_layers", &c->num_layers));
  RETURN_IF_ERROR(f.Int("num_attention_heads", &c->num_attention_heads));
  RETURN_IF_ERROR(f.Int("intermediate_size", &c->intermediate_size));
  if (c->num_attention_heads <= 0) {
    return f.Error("num_attention_heads",
                   "is " + std::to_string(c->num_attention_heads) + ", must be > 0");
  }
  // null: every config class takes num_attention_heads; absent: the class default.
  c->num_kv_heads = f.Present("num_key_value_heads")
                        ? c->num_attention_heads
                        : d.num_kv_heads.value_or(c->num_attention_heads);
  RETURN_IF_ERROR(f.Int("num_key_value_heads", &c->num_kv_heads, false));

  const bool present = f.Present("head_dim"), given = f.Has("head_dim");
  if (given) return f.Int("head_dim", &c->head_dim);
  if (!present && d.head_dim) {
    c->head_dim = *d.head_dim;
    return Status::Ok();
  }
  if (present && c->architecture == Architecture::kQwen3) {
    // Qwen3Attention reads config.head_dim as it is: null has no meaning there.
    return f.Error("head_dim", "is null; " + c->architecture_name +
                                   " needs an integer head_dim (Qwen3Config's default, when the "
                                   "key is absent, is 128)");
  }
  if (c->hidden_size % c->num_attention_heads != 0) {
    return InvalidArgument(f.where() + ": hidden_size " + std::to_string(c->hidden_size) +
                           " is not a multiple of num_attention_heads " +
                           std::to_string(c->num_attention_heads) + " and there is no head_dim");
  }
  c->head_dim = c->hidden_size / c->num_attention_heads;
  return Status::Ok();
}

// Llama's attention_bias and mlp_bias, Qwen3's attention_bias; Qwen2 and Mistral fix theirs.
Status ReadBiases(const JsonFields& f, EngineConfig* c) {
  switch (c->architecture) {
    case Architecture::kLlama: {  // LlamaAttention / LlamaMLP: bias=config.attention_bias /
                                  // mlp_bias
      bool attention_bias = false;
      RETURN_IF_ERROR(f.Bool("attention_bias", &attention_bias, false));
      c->qkv_bias = c->attn_out_bias = attention_bias;
      return f.Bool("mlp_bias", &c->mlp_bias, false);
    }
    case Architecture::kQwen3: {  // Qwen3Attention: q, k, v and o_proj take config.attention_bias
      bool attention_bias = false;
      RETURN_IF_ERROR(f.Bool("attention_bias", &attention_bias, false));
      c->qkv_bias = c->attn_out_bias = attention_bias;
      return Status::Ok();
    }
    case Architecture::kQwen2:  // Qwen2Attention: bias=True on q, k, v; o_proj without
      c->qkv_bias = true;
      c->attn_out_bias = false;
      return Status::Ok();
    default:  // MistralAttention: no biases
      c->qkv_bias = c->attn_out_bias = false;
      return Status::Ok();
  }
}

Status CheckWindow(const JsonFields& f, std::int64_t window) {
  if (window <= 0) {
    return f.Error("sliding_window", "is " + std::to_string(window) +
                                         ", expected a positive number of keys (or null: none)");
  }
  return Status::Ok();
}

// Mistral: sliding_window on every layer (MistralConfig default 4096 when absent, null: none).
// MistralModel masks with create_sliding_window_causal_mask whenever it is set; MistralConfig
// ignores layer_types (it warns to use Ministral instead), so that key stays unread.
Status ReadMistralWindows(const JsonFields& f, EngineConfig* c) {
  std::int64_t window = 4096;
  if (f.Present("sliding_window")) {
    if (!f.Has("sliding_window")) return Status::Ok();
    RETURN_IF_ERROR(f.Int("sliding_window", &window));
  }
  RETURN_IF_ERROR(CheckWindow(f, window));
  c->attention_windows.assign(static_cast<std::size_t>(c->num_layers), window);
  return Status::Ok();
}

// Qwen2 / Qwen3 (Qwen2Config.__post_init__, transformers 5): the window exists only when
// use_sliding_window; layer_types, or else "layer i slides iff i >= max_window_layers", says which
// layers use it (Qwen2Attention: sliding_window if layer_types[i] == "sliding_attention").
Status ReadQwenWindows(const JsonFields& f, EngineConfig* c) {
  bool use_sliding_window = false;
  RETURN_IF_ERROR(f.Bool("use_sliding_window", &use_sliding_window, false));
  std::optional<std::int64_t> window = 4096;
  if (f.Present("sliding_window") && !f.Has("sliding_window")) window.reset();
  if (window) RETURN_IF_ERROR(f.Int("sliding_window", &*window, false));
  if (!use_sliding_window) window.reset();
  if (window) RETURN_IF_ERROR(CheckWindow(f, *window));
  std::int64_t max_window_layers = 28;
  RETURN_IF_ERROR(f.Int("max_window_layers", &max_window_layers, false));

  const auto n = static_cast<std::size_t>(c->num_layers);
  std::vector<std::string> layer_types(n, "full_attention");
  if (const json* lt = f.Get("layer_types")) {
    if (!lt->is_array() || lt->size() != n) {
      return f.Error("layer_types", "is " + lt->dump() + ", expected a list of " +
                                        std::to_string(n) + " layer types (num_hidden_layers)");
    }
    for (std::size_t i = 0; i < n; ++i) {
      const json& t = (*lt)[i];
      if (!t.is_string() || (t.get<std::string>() != "full_attention" &&
                             t.get<std::string>() != "sliding_attention")) {
        return Unsupported(f.where() + ": \"layer_types\"[" + std::to_string(i) + "] " + t.dump() +
                           " is not supported; supported: full_attention, sliding_attention");
      }
      layer_types[i] = t.get<std::string>();
    }
  } else if (window) {
    for (std::size_t i = 0; i < n; ++i) {
      if (static_cast<std::int64_t>(i) >= max_window_layers) layer_types[i] = "sliding_attention";
    }
  }
  std::vector<std::int64_t> windows(n, 0);
  bool any = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (layer_types[i] != "sliding_attention") continue;
    any = true;
    if (!window) {
      return InvalidArgument(
          f.where() + ": \"layer_types\"[" + std::to_string(i) +
          "] is \"sliding_attention\" but there is no window (use_sliding_window " +
          f.Dump("use_sliding_window") + ", sliding_window " + f.Dump("sliding_window") + ")");
    }
    windows[i] = *window;
  }
  if (any) c->attention_windows = std::move(windows);  // else empty: every layer full
  return Status::Ok();
}

}  // namespace

Status ReadLlamaFamilyConfig(const JsonFields& f, EngineConfig* c,
                             std::vector<std::string>* unread) {
  const FamilyDefaults d = DefaultsOf(c->architecture);
  RETURN_IF_ERROR(ReadHeads(f, d, c));
  c->norm = NormKind::kRmsNorm;
  c->norm_eps = 1e-6f;  // rms_norm_eps default of all four config classes
  RETURN_IF_ERROR(f.Float("rms_norm_eps", &c->norm_eps, false));
  c->max_position_embeddings = d.max_position_embeddings;
  RETURN_IF_ERROR(f.Int("max_position_embeddings", &c->max_position_embeddings, false));
  std::string act = "silu";
  RETURN_IF_ERROR(f.String("hidden_act", &act, false));
  // ACT2FN: "swish" is SiLU under its other name.
  if (act != "silu" && act != "swish") {
    return Unsupported(f.where() + ": \"hidden_act\" \"" + act +
                       "\" is not supported; supported: silu (swish)");
  }
  c->activation = Activation::kSwiGlu;
  c->position_embedding = PositionEmbedding::kRope;
  RETURN_IF_ERROR(ReadBiases(f, c));
  // Qwen3Attention: q_norm / k_norm, RMSNorm over head_dim with rms_norm_eps, before RoPE.
  c->qk_norm = c->architecture == Architecture::kQwen3;
  // The windows first: a per-layer-type rope object is read for the layer types in use.
  if (c->architecture == Architecture::kMistral) RETURN_IF_ERROR(ReadMistralWindows(f, c));
  if (c->architecture == Architecture::kQwen2 || c->architecture == Architecture::kQwen3) {
    RETURN_IF_ERROR(ReadQwenWindows(f, c));
  }
  return ReadHfRope(f, *c, &c->rope, unread);
}

}  // namespace inflight::model
