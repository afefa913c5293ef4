// The architecture-independent half of reading a Hugging Face config.json: which model, dtype,
// special tokens, tied embeddings, quantization, and the keys left unread.
#include "model/hf_config.h"

#include <algorithm>
#include <set>

#include "model/hf_config_readers.h"
#include "model/hf_quant_config.h"

namespace inflight::model {
namespace {

using json = nlohmann::json;

// model_type → architecture, for a config.json without "architectures".
std::string ArchitectureFromModelType(const JsonFields& f) {
  std::string t;
  if (!f.String("model_type", &t, false).ok()) return "";
  if (t == "llama") return "LlamaForCausalLM";
  if (t == "mistral") return "MistralForCausalLM";
  if (t == "qwen2") return "Qwen2ForCausalLM";
  if (t == "qwen3") return "Qwen3ForCausalLM";
  if (t == "gpt2") return "GPT2LMHeadModel";
  return "";
}

std::optional<DType> FloatDType(const std::string& name) {
  // torch dtype names as transformers writes them (str(torch.bfloat16) without "torch.").
  if (name == "float" || name == "float32") return DType::kFloat32;
  if (name == "half" || name == "float16") return DType::kFloat16;
  if (name == "bfloat16") return DType::kBFloat16;
  return std::nullopt;
}

}  // namespace

Result<HfConfigReading> ReadHuggingFaceConfig(const std::string& text, const std::string& origin) {
  json hf = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (hf.is_discarded()) return InvalidArgument(origin + ": not valid JSON");
  if (!hf.is_object()) return InvalidArgument(origin + ": expected a JSON object at the top level");
  const JsonFields f(hf, origin);
  HfConfigReading out;
  EngineConfig& c = out.config;
  if (const json* archs = f.Get("architectures")) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      return f.Error("architectures", "is " + archs->dump() + ", expected a list of names");
    }
    c.architecture_name = (*archs)[0].get<std::string>();
  } else {
    c.architecture_name = ArchitectureFromModelType(f);
    if (c.architecture_name.empty()) {
      return InvalidArgument(origin + ": no \"architectures\" list, and \"model_type\" " +
                             f.Dump("model_type") +
                             " is not one of: llama, mistral, qwen2, qwen3, gpt2");
    }
  }
  const auto arch = ParseArchitecture(c.architecture_name);
  if (!arch) {
    return Unsupported("Unsupported architecture \"" + c.architecture_name + "\" in " + origin +
                       ": supported are " + SupportedArchitectures());
  }
  c.architecture = *arch;
  std::vector<std::string> nested_unread;
  if (const json* q = f.Get("quantization_config")) {
    ASSIGN_OR_RETURN(out.checkpoint_quant,
                     ReadQuantizationConfig(q->dump(), origin + " quantization_config"));
    if (c.architecture == Architecture::kGpt2) {
      return Unsupported(origin + ": \"quantization_config\" (quant_method \"" +
                         std::string(CheckpointQuantFormatName(out.checkpoint_quant.format)) +
                         "\") is not supported for GPT2LMHeadModel; quantized checkpoints are "
                         "read for LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                         "Qwen3ForCausalLM");
    }
    c.quant = out.checkpoint_quant.engine;
    nested_unread.insert(nested_unread.end(), out.checkpoint_quant.unread_keys.begin(),
                         out.checkpoint_quant.unread_keys.end());
  }
  RETURN_IF_ERROR(f.Int("vocab_size", &c.vocab_size));
  if (c.architecture == Architecture::kGpt2) {
    RETURN_IF_ERROR(ReadGpt2Config(f, &c));
  } else {
    RETURN_IF_ERROR(ReadLlamaFamilyConfig(f, &c, &nested_unread));
  }
  // GPT2Config leaves tie_word_embeddings at PreTrainedConfig's default, true; the other four
  // config classes default it to false.
  c.tie_word_embeddings = c.architecture == Architecture::kGpt2;
  RETURN_IF_ERROR(f.Bool("tie_word_embeddings", &c.tie_word_embeddings, false));
  RETURN_IF_ERROR(f.TokenId("bos_token_id", &c.bos_token_id));
  RETURN_IF_ERROR(f.TokenId("eos_token_id", &c.eos_token_id));

  // PreTrainedConfig.__post_init__ (transformers 5): `dtype` wins; `torch_dtype` is the 4.x name.
  std::string dtype_name;
  const char* dtype_key = f.Has("dtype") ? "dtype" : "torch_dtype";
  f.MarkRead("torch_dtype");
  RETURN_IF_ERROR(f.String(dtype_key, &dtype_name, false));
  out.config_dtype_text = dtype_name;
  out.config_dtype = FloatDType(dtype_name);
  c.dtype = out.config_dtype.value_or(DType::kFloat32);

  c.build.max_seq_len = static_cast<std::int32_t>(
      std::min<std::int64_t>(c.max_position_embeddings, c.build.max_seq_len));
  c.build.max_input_len = std::min(c.build.max_input_len, c.build.max_seq_len);
  Status st = c.Validate();
  if (!st.ok()) return Status(st.code(), origin + ": " + st.message());

  const std::vector<std::string> no_effect = NoEffectHfFields(c.architecture);
  out.unread_keys = f.Unread(std::set<std::string>(no_effect.begin(), no_effect.end()));
  out.unread_keys.insert(out.unread_keys.end(), nested_unread.begin(), nested_unread.end());
  std::sort(out.unread_keys.begin(), out.unread_keys.end());
  return out;
}

Result<EngineConfig> EngineConfigFromHuggingFace(const std::string& text,
                                                 const std::string& origin) {
  ASSIGN_OR_RETURN(HfConfigReading r, ReadHuggingFaceConfig(text, origin));
  return std::move(r.config);
}

}  // namespace inflight::model
