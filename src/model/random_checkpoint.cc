#include "model/random_checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/parallel_safetensors_writer.h"

namespace inflight::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The files transformers' tokenizers read; whichever exist are copied.
constexpr const char* kTokenizerFiles[] = {"vocab.json", "merges.txt", "tokenizer.json",
                                           "tokenizer_config.json", "special_tokens_map.json"};

bool IsGpt2(const RandomCheckpointOptions& o) {
  return o.arch == "gpt2";
}

std::int64_t HeadDim(const RandomCheckpointOptions& o) {
  return o.head_dim.value_or(o.num_heads > 0 ? o.hidden_size / o.num_heads : 0);
}

bool Tied(const RandomCheckpointOptions& o) {
  return o.tie_word_embeddings.value_or(o.arch == "gpt2" || o.arch == "qwen2");
}

Result<json> ReadJsonFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(path.string() + " is not valid JSON");
  return j;
}

// bos_token / eos_token in tokenizer_config.json: a string, or {"content": "..."} (AddedToken).
std::optional<std::string> SpecialTokenText(const json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return std::nullopt;
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

Status CopyFile(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec)
    return Internal("cannot copy " + from.string() + " to " + to.string() + ": " + ec.message());
  return Status::Ok();
}

Status WriteTextFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Internal("cannot write " + path.string());
  return Status::Ok();
}

std::string ShardName(int k, int n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05d-of-%05d.safetensors", k, n);
  return buf;
}

}  // namespace

Status ApplyCheckpointPreset(std::string_view preset, RandomCheckpointOptions* o) {
  if (preset == "tiny") {
    o->hidden_size = 64;
    o->num_layers = 2;
    o->num_heads = 4;
    o->num_kv_heads = 2;
    o->intermediate_size = 128;
    return Status::Ok();
  }
  // Large enough for a CPU step to be dominated by reading weights, small enough to build in
  // seconds.
  if (preset == "small") {
    o->hidden_size = 512;
    o->num_layers = 4;
    o->num_heads = 8;
    o->num_kv_heads = 2;
    o->intermediate_size = 1536;
    o->vocab_size = 8192;
    return Status::Ok();
  }
  // Llama-3.1-8B and -70B's shapes (their config.json files on the Hugging Face hub): one rope
  // scaling, vocabulary and special ids; 70B 80 layers of hidden 8192, 64/8 heads, intermediate
  // 28672.
  const bool llama70b = preset == "llama-3.1-70b";
  if (preset == "llama-3.1-8b" || llama70b) {
    o->arch = "llama";
    o->hidden_size = llama70b ? 8192 : 4096;
    o->num_layers = llama70b ? 80 : 32;
    o->num_heads = llama70b ? 64 : 32;
    o->num_kv_heads = 8;
    o->intermediate_size = llama70b ? 28672 : 14336;
    o->vocab_size = 128256;
    o->max_position_embeddings = 131072;
    o->rope.type = RopeType::kLlama3;
    o->rope.theta = 500000.0;
    o->rope.factor = 8.0;
    o->rope.low_freq_factor = 1.0;
    o->rope.high_freq_factor = 4.0;
    o->rope.original_max_position_embeddings = 8192;
    o->tie_word_embeddings = false;
    o->dtype = DType::kBFloat16;
    o->bos_token_id = 128000;
    o->eos_token_id = 128001;
    return Status::Ok();
  }
  return InvalidArgument("--preset \"" + std::string(preset) +
                         "\" is not one of: tiny, small, llama-3.1-8b, llama-3.1-70b");
}

Status ValidateCheckpointOptions(const RandomCheckpointOptions& o) {
  if (o.arch != "llama" && o.arch != "mistral" && o.arch != "qwen2" && o.arch != "qwen3" &&
      o.arch != "gpt2") {
    return InvalidArgument("--arch \"" + o.arch +
                           "\" is not one of: llama, mistral, qwen2, qwen3, gpt2");
  }
  auto positive = [](const char* flag, std::int64_t v) -> Status {
    if (v <= 0)
      return InvalidArgument(std::string(flag) + " " + std::to_string(v) + " must be > 0");
    return Status::Ok();
  };
  RETURN_IF_ERROR(positive("--hidden_size", o.hidden_size));
  RETURN_IF_ERROR(positive("--num_layers", o.num_layers));
  RETURN_IF_ERROR(positive("--num_heads", o.num_heads));
  RETURN_IF_ERROR(positive("--num_kv_heads", o.num_kv_heads));
  RETURN_IF_ERROR(positive("--intermediate_size", o.intermediate_size));
  RETURN_IF_ERROR(positive("--max_position_embeddings", o.max_position_embeddings));
  if (o.vocab_size) RETURN_IF_ERROR(positive("--vocab_size", *o.vocab_size));
  if (o.num_heads % o.num_kv_heads != 0) {
    return InvalidArgument("--num_heads " + std::to_string(o.num_heads) +
                           " is not a multiple of --num_kv_heads " +
                           std::to_string(o.num_kv_heads));
  }
  if (!o.head_dim && o.hidden_size % o.num_heads != 0) {
    return InvalidArgument("--hidden_size " + std::to_string(o.hidden_size) +
                           " is not a multiple of --num_heads " + std::to_string(o.num_heads));
  }
  if (o.head_dim) RETURN_IF_ERROR(positive("--head_dim", *o.head_dim));
  if (IsGpt2(o)) {
    if (o.num_kv_heads != o.num_heads || o.head_dim || o.rope.type != RopeType::kDefault) {
      return InvalidArgument(
          "--arch gpt2 has num_kv_heads == num_heads, no head_dim and no "
          "rope_scaling");
    }
    if (!Tied(o)) return InvalidArgument("--arch gpt2 always ties word embeddings");
  }
  if (o.sliding_window && o.arch != "mistral" && o.arch != "qwen2" && o.arch != "qwen3") {
    return InvalidArgument("--sliding_window applies to --arch mistral, qwen2 or qwen3, got " +
                           o.arch);
  }
  if (o.sliding_window) RETURN_IF_ERROR(positive("--sliding_window", *o.sliding_window));
  if (o.max_window_layers && (*o.max_window_layers < 0 || !o.sliding_window)) {
    return InvalidArgument("--max_window_layers needs --sliding_window and a value >= 0");
  }
  if ((o.attention_bias && o.arch != "llama" && o.arch != "qwen3") ||
      (o.mlp_bias && o.arch != "llama")) {
    return InvalidArgument(
        "--attention_bias applies to --arch llama or qwen3, --mlp_bias to llama; got " + o.arch);
  }
  if (o.dtype != DType::kFloat32 && o.dtype != DType::kFloat16 && o.dtype != DType::kBFloat16) {
    return InvalidArgument(std::string("--dtype ") + DTypeName(o.dtype) +
                           " is not one of: float32, float16, bfloat16");
  }
  if (o.shards < 1 || o.shards > 99999) {
    return InvalidArgument("--shards " + std::to_string(o.shards) + " is outside [1, 99999]");
  }
  if (!(o.init_std >= 0)) return InvalidArgument("--init_std must be >= 0");
  if (!IsGpt2(o)) {
    RopeConfig rope = o.rope;
    if (rope.original_max_position_embeddings == 0) {
      rope.original_max_position_embeddings = o.max_position_embeddings;
    }
    RETURN_IF_ERROR(ValidateRopeConfig(rope, HeadDim(o), "--rope_*"));
  }
  return Status::Ok();
}

Result<TokenizerInfo> ReadTokenizerInfo(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound("--tokenizer_dir " + dir + " does not exist");
  TokenizerInfo info;
  for (const char* name : kTokenizerFiles) {
    const fs::path p = fs::path(dir) / name;
    if (fs::exists(p, ec)) info.files.push_back(p.string());
  }
  if (info.files.empty()) {
    return NotFound("--tokenizer_dir " + dir + " has none of: vocab.json, merges.txt, " +
                    "tokenizer.json, tokenizer_config.json, special_tokens_map.json");
  }
  std::map<std::string, std::int64_t> ids;  // token text → id, over every source
  auto add_vocab = [&](const json& vocab) {
    if (!vocab.is_object()) return;
    for (const auto& [tok, id] : vocab.items()) {
      if (id.is_number_integer()) ids[tok] = id.get<std::int64_t>();
    }
  };
  if (fs::exists(fs::path(dir) / "vocab.json", ec)) {
    ASSIGN_OR_RETURN(json v, ReadJsonFile(fs::path(dir) / "vocab.json"));
    add_vocab(v);
  }
  if (fs::exists(fs::path(dir) / "tokenizer.json", ec)) {
    ASSIGN_OR_RETURN(json t, ReadJsonFile(fs::path(dir) / "tokenizer.json"));
    if (t.contains("model") && t["model"].is_object() && t["model"].contains("vocab")) {
      add_vocab(t["model"]["vocab"]);
    }
    if (t.contains("added_tokens") && t["added_tokens"].is_array()) {
      for (const json& a : t["added_tokens"]) {
        if (a.is_object() && a.contains("id") && a["id"].is_number_integer() &&
            a.contains("content") && a["content"].is_string()) {
          ids[a["content"].get<std::string>()] = a["id"].get<std::int64_t>();
        }
      }
    }
  }
  json cfg = json::object();
  if (fs::exists(fs::path(dir) / "tokenizer_config.json", ec)) {
    ASSIGN_OR_RETURN(cfg, ReadJsonFile(fs::path(dir) / "tokenizer_config.json"));
    if (cfg.contains("added_tokens_decoder") && cfg["added_tokens_decoder"].is_object()) {
      for (const auto& [id, tok] : cfg["added_tokens_decoder"].items()) {
        if (tok.is_object() && tok.contains("content") && tok["content"].is_string()) {
          ids[tok["content"].get<std::string>()] = std::strtoll(id.c_str(), nullptr, 10);
        }
      }
    }
  }
  json special = json::object();
  if (fs::exists(fs::path(dir) / "special_tokens_map.json", ec)) {
    ASSIGN_OR_RETURN(special, ReadJsonFile(fs::path(dir) / "special_tokens_map.json"));
  }
  for (const auto& [tok, id] : ids) {
    info.vocab_size = std::max<std::int64_t>(info.vocab_size.value_or(0), id + 1);
  }
  auto lookup = [&](const char* key) -> std::optional<std::int32_t> {
    std::optional<std::string> text = SpecialTokenText(cfg, key);
    if (!text) text = SpecialTokenText(special, key);
    if (!text)
      text = "<|endoftext|>";  // GPT-2's tokenizer_config.json names none; this is its bos/eos
    const auto it = ids.find(*text);
    if (it == ids.end()) return std::nullopt;
    return static_cast<std::int32_t>(it->second);
  };
  info.bos_token_id = lookup("bos_token");
  info.eos_token_id = lookup("eos_token");
  return info;
}

std::vector<HfTensorSpec> CheckpointTensors(const RandomCheckpointOptions& o) {
  const std::int64_t h = o.hidden_size, v = o.vocab_size.value_or(1000), in = o.intermediate_size;
  const std::int64_t hd = HeadDim(o), q = o.num_heads * hd, kv = o.num_kv_heads * hd;
  std::vector<HfTensorSpec> t;
  auto add = [&](std::string name, std::vector<std::int64_t> shape, InitKind init) {
    t.push_back({std::move(name), std::move(shape), init});
  };
  if (IsGpt2(o)) {
    // GPT2LMHeadModel.save_pretrained: "transformer." names, Conv1D weights [in, out], lm_head
    // tied.
    add("transformer.wte.weight", {v, h}, InitKind::kWeight);
    add("transformer.wpe.weight", {o.max_position_embeddings, h}, InitKind::kWeight);
    for (std::int64_t i = 0; i < o.num_layers; ++i) {
      const std::string p = "transformer.h." + std::to_string(i) + ".";
      add(p + "ln_1.weight", {h}, InitKind::kNormWeight);
      add(p + "ln_1.bias", {h}, InitKind::kBias);
      add(p + "attn.c_attn.weight", {h, 3 * h}, InitKind::kWeight);
      add(p + "attn.c_attn.bias", {3 * h}, InitKind::kBias);
      add(p + "attn.c_proj.weight", {h, h}, InitKind::kWeight);
      add(p + "attn.c_proj.bias", {h}, InitKind::kBias);
      add(p + "ln_2.weight", {h}, InitKind::kNormWeight);
      add(p + "ln_2.bias", {h}, InitKind::kBias);
      add(p + "mlp.c_fc.weight", {h, in}, InitKind::kWeight);
      add(p + "mlp.c_fc.bias", {in}, InitKind::kBias);
      add(p + "mlp.c_proj.weight", {in, h}, InitKind::kWeight);
      add(p + "mlp.c_proj.bias", {h}, InitKind::kBias);
    }
    add("transformer.ln_f.weight", {h}, InitKind::kNormWeight);
    add("transformer.ln_f.bias", {h}, InitKind::kBias);
    return t;
  }
  // Qwen2 always has q, k, v biases; Llama and Qwen3 have q, k, v and o biases with
  // attention_bias; Llama's mlp_bias puts biases on all three MLP projections.
  const bool qkv_bias = o.arch == "qwen2" || o.attention_bias;
  const bool o_bias = o.attention_bias, mlp_bias = o.mlp_bias, qk_norm = o.arch == "qwen3";
  add("model.embed_tokens.weight", {v, h}, InitKind::kWeight);
  for (std::int64_t i = 0; i < o.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {h}, InitKind::kNormWeight);
    add(p + "self_attn.q_proj.weight", {q, h}, InitKind::kWeight);
    if (qkv_bias) add(p + "self_attn.q_proj.bias", {q}, InitKind::kBias);
    add(p + "self_attn.k_proj.weight", {kv, h}, InitKind::kWeight);
    if (qkv_bias) add(p + "self_attn.k_proj.bias", {kv}, InitKind::kBias);
    add(p + "self_attn.v_proj.weight", {kv, h}, InitKind::kWeight);
    if (qkv_bias) add(p + "self_attn.v_proj.bias", {kv}, InitKind::kBias);
    add(p + "self_attn.o_proj.weight", {h, q}, InitKind::kWeight);
    if (o_bias) add(p + "self_attn.o_proj.bias", {h}, InitKind::kBias);
    if (qk_norm) {
      add(p + "self_attn.q_norm.weight", {hd}, InitKind::kNormWeight);
      add(p + "self_attn.k_norm.weight", {hd}, InitKind::kNormWeight);
    }
    add(p + "post_attention_layernorm.weight", {h}, InitKind::kNormWeight);
    add(p + "mlp.gate_proj.weight", {in, h}, InitKind::kWeight);
    if (mlp_bias) add(p + "mlp.gate_proj.bias", {in}, InitKind::kBias);
    add(p + "mlp.up_proj.weight", {in, h}, InitKind::kWeight);
    if (mlp_bias) add(p + "mlp.up_proj.bias", {in}, InitKind::kBias);
    add(p + "mlp.down_proj.weight", {h, in}, InitKind::kWeight);
    if (mlp_bias) add(p + "mlp.down_proj.bias", {h}, InitKind::kBias);
  }
  add("model.norm.weight", {h}, InitKind::kNormWeight);
  if (!Tied(o)) add("lm_head.weight", {v, h}, InitKind::kWeight);
  return t;
}

namespace {

// The rope object's type-specific keys, as transformers keeps them in rope_scaling (4.x) or
// rope_parameters (5.x). original_max_position_embeddings 0: not written (the reader's default,
// max_position_embeddings), except in 5.x, whose standardize_rope_params writes the default.
json RopeTypeParameters(const RandomCheckpointOptions& o, bool layout5) {
  const RopeConfig& r = o.rope;
  json j = json::object();
  j["rope_type"] = RopeTypeName(r.type);
  if (r.type == RopeType::kDefault) return j;
  j["factor"] = r.factor;
  const std::int64_t original = r.original_max_position_embeddings != 0
                                    ? r.original_max_position_embeddings
                                    : (layout5 ? o.max_position_embeddings : 0);
  if ((r.type == RopeType::kLlama3 || r.type == RopeType::kYarn) && original != 0) {
    j["original_max_position_embeddings"] = original;
  }
  if (r.type == RopeType::kLlama3) {
    j["low_freq_factor"] = r.low_freq_factor;
    j["high_freq_factor"] = r.high_freq_factor;
  }
  if (r.type == RopeType::kYarn) {
    if (r.beta_fast != 32.0) j["beta_fast"] = r.beta_fast;
    if (r.beta_slow != 1.0) j["beta_slow"] = r.beta_slow;
    if (r.mscale) j["mscale"] = *r.mscale;
    if (r.mscale_all_dim) j["mscale_all_dim"] = *r.mscale_all_dim;
    if (!r.truncate) j["truncate"] = false;
  }
  return j;
}

// Which layers of a qwen2 / qwen3 checkpoint slide (Qwen2Config.__post_init__).
std::vector<std::string> QwenLayerTypes(const RandomCheckpointOptions& o) {
  std::vector<std::string> types;
  const std::int64_t first = o.max_window_layers.value_or(o.num_layers);
  for (std::int64_t i = 0; i < o.num_layers; ++i) {
    types.push_back(o.sliding_window && i >= first ? "sliding_attention" : "full_attention");
  }
  return types;
}

}  // namespace

std::string CheckpointConfigJson(const RandomCheckpointOptions& o) {
  const bool layout5 = o.layout == ConfigLayout::kTransformers5;
  const std::int64_t v = o.vocab_size.value_or(1000);
  json j;  // std::map-backed: keys come out sorted, as transformers writes them
  j[layout5 ? "dtype" : "torch_dtype"] = DTypeName(o.dtype);
  j["transformers_version"] = layout5 ? "5.0.0" : "4.46.0";
  j["use_cache"] = true;
  j["vocab_size"] = v;
  j["initializer_range"] = o.init_std;
  j["tie_word_embeddings"] = Tied(o);
  const std::int32_t last = static_cast<std::int32_t>(v - 1);
  if (IsGpt2(o)) {
    j["architectures"] = {"GPT2LMHeadModel"};
    j["model_type"] = "gpt2";
    j["activation_function"] = "gelu_new";
    j["attn_pdrop"] = 0.1;
    j["embd_pdrop"] = 0.1;
    j["resid_pdrop"] = 0.1;
    j["layer_norm_epsilon"] = 1e-5;
    j["n_ctx"] = o.max_position_embeddings;
    j["n_positions"] = o.max_position_embeddings;
    j["n_embd"] = o.hidden_size;
    j["n_head"] = o.num_heads;
    j["n_layer"] = o.num_layers;
    j["n_inner"] =
        o.intermediate_size == 4 * o.hidden_size ? json(nullptr) : json(o.intermediate_size);
    j["scale_attn_weights"] = true;
    j["summary_activation"] = nullptr;
    j["summary_first_dropout"] = 0.1;
    j["summary_proj_to_labels"] = true;
    j["summary_type"] = "cls_index";
    j["summary_use_proj"] = true;
    j["bos_token_id"] = o.bos_token_id.value_or(last);
    j["eos_token_id"] = o.eos_token_id.value_or(last);
    return j.dump(2) + "\n";
  }
  const bool qwen = o.arch == "qwen2" || o.arch == "qwen3";
  j["architectures"] = {o.arch == "llama"     ? "LlamaForCausalLM"
                        : o.arch == "mistral" ? "MistralForCausalLM"
                        : o.arch == "qwen2"   ? "Qwen2ForCausalLM"
                                              : "Qwen3ForCausalLM"};
  j["model_type"] = o.arch;
  j["attention_dropout"] = 0.0;
  j["hidden_act"] = "silu";
  j["hidden_size"] = o.hidden_size;
  j["intermediate_size"] = o.intermediate_size;
  j["max_position_embeddings"] = o.max_position_embeddings;
  j["num_attention_heads"] = o.num_heads;
  j["num_hidden_layers"] = o.num_layers;
  j["num_key_value_heads"] = o.num_kv_heads;
  j["bos_token_id"] = o.bos_token_id.value_or(std::min(1, last));
  j["eos_token_id"] = o.eos_token_id.value_or(std::min(2, last));
  j["rms_norm_eps"] = qwen ? 1e-6 : 1e-5;
  if (o.arch != "qwen2" || o.head_dim) j["head_dim"] = HeadDim(o);
  if (layout5) {
    json rope = RopeTypeParameters(o, true);
    rope["rope_theta"] = o.rope.theta;
    j["rope_parameters"] = rope;
  } else {
    j["rope_theta"] = o.rope.theta;
    j["rope_scaling"] =
        o.rope.type == RopeType::kDefault ? json(nullptr) : RopeTypeParameters(o, false);
  }
  if (o.arch == "llama") {
    j["attention_bias"] = o.attention_bias;
    j["mlp_bias"] = o.mlp_bias;
    j["pretraining_tp"] = 1;
  }
  if (o.arch == "mistral") {
    j["sliding_window"] = o.sliding_window ? json(*o.sliding_window) : json(nullptr);
  }
  if (qwen) {
    if (o.arch == "qwen3") j["attention_bias"] = o.attention_bias;
    j["use_sliding_window"] = o.sliding_window.has_value();
    // transformers 5 sets sliding_window to None when use_sliding_window is false, before saving.
    j["sliding_window"] = o.sliding_window ? json(*o.sliding_window)
                          : layout5        ? json(nullptr)
                                           : json(o.max_position_embeddings);
    j["max_window_layers"] = o.max_window_layers.value_or(o.num_layers);
    if (layout5) j["layer_types"] = QwenLayerTypes(o);
  }
  return j.dump(2) + "\n";
}

Result<RandomCheckpointOptions> ResolveCheckpointOptions(RandomCheckpointOptions o) {
  if (!o.tokenizer_dir.empty()) {
    ASSIGN_OR_RETURN(TokenizerInfo tok, ReadTokenizerInfo(o.tokenizer_dir));
    if (!o.vocab_size) o.vocab_size = tok.vocab_size;
    if (!o.bos_token_id) o.bos_token_id = tok.bos_token_id;
    if (!o.eos_token_id) o.eos_token_id = tok.eos_token_id;
  }
  if (!o.vocab_size) o.vocab_size = 1000;
  RETURN_IF_ERROR(ValidateCheckpointOptions(o));
  for (auto* id : {&o.bos_token_id, &o.eos_token_id}) {
    if (*id && (**id < 0 || **id >= *o.vocab_size)) {
      return InvalidArgument("special token id " + std::to_string(**id) +
                             " is outside the vocabulary [0, " + std::to_string(*o.vocab_size) +
                             ")");
    }
  }
  return o;
}

Result<CheckpointSummary> WriteRandomCheckpoint(RandomCheckpointOptions options,
                                                const std::string& output_dir,
                                                const CheckpointProgressFn& progress) {
  ASSIGN_OR_RETURN(const RandomCheckpointOptions o, ResolveCheckpointOptions(std::move(options)));
  std::optional<TokenizerInfo> tok;
  if (!o.tokenizer_dir.empty()) {
    ASSIGN_OR_RETURN(tok, ReadTokenizerInfo(o.tokenizer_dir));
  }
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) return Internal("cannot create " + output_dir + ": " + ec.message());

  CheckpointSummary summary;
  summary.vocab_size = *o.vocab_size;
  const std::vector<HfTensorSpec> specs = CheckpointTensors(o);
  std::vector<std::uint64_t> sizes;
  std::uint64_t total = 0;
  for (const HfTensorSpec& s : specs) {
    std::uint64_t n = DTypeSize(o.dtype);
    for (std::int64_t d : s.shape) n *= static_cast<std::uint64_t>(d);
    sizes.push_back(n);
    total += n;
  }
  // Consecutive tensors fill a shard until it holds about total / shards bytes; every shard gets
  // one.
  const int num_shards = static_cast<int>(std::min<std::size_t>(o.shards, specs.size()));
  std::vector<int> shard_of(specs.size());
  {
    int cur = 0;
    std::uint64_t in_cur = 0;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const auto later_shards = static_cast<std::size_t>(num_shards - cur - 1);
      if (in_cur > 0 && later_shards > 0 &&
          (in_cur >= total / num_shards || specs.size() - i <= later_shards)) {
        ++cur;
        in_cur = 0;
      }
      shard_of[i] = cur;
      in_cur += sizes[i];
    }
  }
  std::uint64_t done = 0;
  std::int64_t tensors_done = 0;
  const auto tensors_total = static_cast<std::int64_t>(specs.size());
  json weight_map = json::object();
  for (int k = 0; k < num_shards; ++k) {
    ParallelSafetensorsWriter writer;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (shard_of[i] != k) continue;
      const HfTensorSpec& s = specs[i];
      const DType dtype = o.dtype;
      const std::uint64_t seed = o.seed;
      const double init_std = o.init_std;
      RETURN_IF_ERROR(writer.AddLazy(
          s.name, dtype, s.shape, [&s, dtype, seed, init_std](std::byte* dst, std::size_t nbytes) {
            FillRandomTensor(seed, s.name, s.init, init_std, dtype, dst, nbytes / DTypeSize(dtype));
            return Status::Ok();
          }));
    }
    const std::string file = num_shards == 1 ? "model.safetensors" : ShardName(k + 1, num_shards);
    const fs::path path = fs::path(output_dir) / file;
    RETURN_IF_ERROR(writer.Write(path.string(), [&](const std::string& name, std::size_t nbytes) {
      done += nbytes;
      tensors_done += 1;
      weight_map[name] = file;
      if (progress) progress(name, tensors_done, tensors_total, done, total);
    }));
    summary.files.push_back(path.string());
  }
  if (num_shards > 1) {
    const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    const fs::path path = fs::path(output_dir) / "model.safetensors.index.json";
    RETURN_IF_ERROR(WriteTextFile(path, index.dump(2) + "\n"));
    summary.files.push_back(path.string());
  } else {
    fs::remove(fs::path(output_dir) / "model.safetensors.index.json",
               ec);  // stale from a sharded run
  }
  const fs::path config_path = fs::path(output_dir) / "config.json";
  RETURN_IF_ERROR(WriteTextFile(config_path, CheckpointConfigJson(o)));
  summary.files.push_back(config_path.string());
  if (tok) {
    for (const std::string& f : tok->files) {
      const fs::path to = fs::path(output_dir) / fs::path(f).filename();
      if (fs::exists(to, ec) && fs::equivalent(f, to, ec)) continue;
      RETURN_IF_ERROR(CopyFile(f, to));
      summary.files.push_back(to.string());
    }
  }
  summary.num_tensors = static_cast<std::int64_t>(specs.size());
  summary.num_bytes = total;
  return summary;
}

}  // namespace inflight::model
