// The config.json fields that change what transformers' model computes, per architecture, and what
// the converter does with each (docs/hf_config.md is this table in prose). Sources, transformers 5
// unless noted: models/<arch>/configuration_<arch>.py for the defaults, modeling_<arch>.py for
// what the forward pass reads, modeling_rope_utils.py for RoPE, configuration_utils.py for dtype.
#include "model/hf_config.h"

namespace inflight::model {
namespace {

constexpr std::uint32_t kLlama = ArchitectureBit(Architecture::kLlama);
constexpr std::uint32_t kMistral = ArchitectureBit(Architecture::kMistral);
constexpr std::uint32_t kQwen2 = ArchitectureBit(Architecture::kQwen2);
constexpr std::uint32_t kQwen3 = ArchitectureBit(Architecture::kQwen3);
constexpr std::uint32_t kGpt2 = ArchitectureBit(Architecture::kGpt2);
constexpr std::uint32_t kRopeFamily = kLlama | kMistral | kQwen2 | kQwen3;
constexpr std::uint32_t kAll = kRopeFamily | kGpt2;

using enum HfFieldUse;

constexpr HfFieldRule kRules[] = {
    // ---- Every architecture ----
    {"architectures", kAll, kHonoured, "the first entry picks the model; absent: model_type"},
    {"dtype", kAll, kPartly,
     "5.x: the engine dtype unless --dtype is given: float32, float16, bfloat16 (wins over "
     "torch_dtype, configuration_utils.py); absent in both: the weights' dtype"},
    {"torch_dtype", kAll, kPartly, "4.x spelling of dtype"},
    {"vocab_size", kAll, kHonoured, "required"},
    {"tie_word_embeddings", kAll, kHonoured,
     "lm_head is embed_tokens; default false (GPT-2: true)"},
    {"bos_token_id", kAll, kHonoured, "recorded in the engine (a list: its first id)"},
    {"eos_token_id", kAll, kHonoured, "recorded in the engine as the default end_id"},
    {"quantization_config", kAll, kPartly,
     "quant_method compressed-tensors (FP8), modelopt (FP8), awq (4-bit gemm), gptq (4 or 8 bits); "
     "every setting honoured or refused by name (model/hf_quant_config.h)"},
    {"transformers_version", kAll, kNoEffect, "bookkeeping"},
    {"_name_or_path", kAll, kNoEffect, "bookkeeping"},
    {"model_type", kAll, kNoEffect, "picks the model only when architectures is absent"},
    {"use_cache", kAll, kNoEffect, "the engine always keeps a KV cache"},
    {"initializer_range", kAll, kNoEffect, "weight initialisation, not inference"},
    {"pad_token_id", kAll, kNoEffect, "embedding padding_idx only changes training"},
    {"output_attentions", kAll, kNoEffect, "what a forward call returns, not what it computes"},
    {"output_hidden_states", kAll, kNoEffect, "as output_attentions"},
    {"return_dict", kAll, kNoEffect, "as output_attentions"},
    {"id2label", kAll, kNoEffect, "classification heads only"},
    {"label2id", kAll, kNoEffect, "classification heads only"},
    {"task_specific_params", kAll, kNoEffect, "pipelines' generation defaults"},
    // ---- Llama, Mistral, Qwen2, Qwen3 ----
    {"hidden_size", kRopeFamily, kHonoured, "required"},
    {"intermediate_size", kRopeFamily, kHonoured, "required"},
    {"num_hidden_layers", kRopeFamily, kHonoured, "required"},
    {"num_attention_heads", kRopeFamily, kHonoured, "required"},
    {"num_key_value_heads", kRopeFamily, kHonoured,
     "null: num_attention_heads; absent: the class default (Llama num_attention_heads, Mistral 8, "
     "Qwen2 and Qwen3 32)"},
    {"head_dim", kRopeFamily, kHonoured,
     "absent or null: hidden_size / num_attention_heads; Qwen3 absent: 128 (Qwen3Config)"},
    {"hidden_act", kRopeFamily, kPartly, "silu (swish); any other activation is refused"},
    {"rms_norm_eps", kRopeFamily, kHonoured, "default 1e-6"},
    {"max_position_embeddings", kRopeFamily, kHonoured,
     "default Llama 2048, Mistral 131072, Qwen2 and Qwen3 32768; dynamic RoPE grows theta past "
     "it, yarn and llama3 default original_max_position_embeddings to it, the build's "
     "max_seq_len defaults to min(it, 2048)"},
    {"rope_theta", kRopeFamily, kHonoured,
     "4.x; 5.x keeps it in rope_parameters (which wins); default 10000"},
    {"rope_scaling", kRopeFamily, kPartly,
     "4.x; wins over rope_parameters when both are set. type or rope_type default, linear, "
     "dynamic, yarn, llama3 with their parameters (modeling_rope_utils.py); longrope and any "
     "other type are refused"},
    {"rope_parameters", kRopeFamily, kPartly,
     "5.x: rope_type and rope_theta plus the type's parameters, as rope_scaling. A per-layer-type "
     "object ({\"full_attention\": {...}}): Qwen2 and Qwen3 when the layer types in use agree; "
     "otherwise, and for Llama and Mistral, refused"},
    {"partial_rotary_factor", kRopeFamily, kPartly,
     "1.0 honoured; any other value refused (these models rotate the whole head)"},
    {"attention_bias", kLlama | kQwen3, kHonoured,
     "biases on q, k, v and o_proj; default false. Mistral has none and Qwen2 always has q, k, v "
     "(not o) biases: their models do not read the field"},
    {"mlp_bias", kLlama, kHonoured, "biases on gate_proj, up_proj and down_proj; default false"},
    {"sliding_window", kMistral, kHonoured,
     "every layer attends to the last sliding_window keys (masking_utils: key j visible to query "
     "i when i - window < j <= i); absent: 4096 (MistralConfig); null: full attention"},
    {"sliding_window", kQwen2 | kQwen3, kHonoured,
     "the window of the sliding_attention layers; only when use_sliding_window"},
    {"use_sliding_window", kQwen2 | kQwen3, kHonoured, "default false: every layer full"},
    {"max_window_layers", kQwen2 | kQwen3, kHonoured,
     "without layer_types: layers i >= max_window_layers slide (default 28)"},
    {"layer_types", kQwen2 | kQwen3, kPartly,
     "full_attention or sliding_attention per layer (wins over max_window_layers); other layer "
     "types are refused"},
    {"attention_dropout", kRopeFamily, kNoEffect, "dropout is off at inference"},
    {"pretraining_tp", kLlama, kNoEffect,
     "transformers 4 split lm_head and the MLP into this many slices: the same sums"},
    // ---- GPT-2 ----
    {"n_embd", kGpt2, kHonoured, "required"},
    {"n_layer", kGpt2, kHonoured, "required"},
    {"n_head", kGpt2, kHonoured, "required"},
    {"n_positions", kGpt2, kHonoured, "required; the learned position table's rows"},
    {"n_inner", kGpt2, kHonoured, "null or absent: 4 * n_embd"},
    {"activation_function", kGpt2, kPartly,
     "gelu_new, gelu_pytorch_tanh, gelu_fast (one tanh approximation); any other is refused"},
    {"layer_norm_epsilon", kGpt2, kHonoured, "default 1e-5"},
    {"scale_attn_weights", kGpt2, kPartly,
     "true honoured (scores / sqrt(head_dim)); false refused"},
    {"scale_attn_by_inverse_layer_idx", kGpt2, kPartly, "false honoured; true refused"},
    {"reorder_and_upcast_attn", kGpt2, kNoEffect,
     "computes the scores in fp32, as the engine's attention always does"},
    {"add_cross_attention", kGpt2, kNoEffect,
     "cross-attention runs only with encoder states, which a causal LM request never has"},
    {"n_ctx", kGpt2, kNoEffect, "a legacy alias that GPT2Model does not read"},
    {"attn_pdrop", kGpt2, kNoEffect, "dropout"},
    {"embd_pdrop", kGpt2, kNoEffect, "dropout"},
    {"resid_pdrop", kGpt2, kNoEffect, "dropout"},
    {"summary_activation", kGpt2, kNoEffect, "GPT2DoubleHeadsModel's head"},
    {"summary_first_dropout", kGpt2, kNoEffect, "GPT2DoubleHeadsModel's head"},
    {"summary_proj_to_labels", kGpt2, kNoEffect, "GPT2DoubleHeadsModel's head"},
    {"summary_type", kGpt2, kNoEffect, "GPT2DoubleHeadsModel's head"},
    {"summary_use_proj", kGpt2, kNoEffect, "GPT2DoubleHeadsModel's head"},
};

}  // namespace

std::span<const HfFieldRule> HfFieldRules() {
  return kRules;
}

std::vector<std::string> NoEffectHfFields(Architecture architecture) {
  std::vector<std::string> out;
  for (const HfFieldRule& r : kRules) {
    if (r.use == HfFieldUse::kNoEffect && (r.architectures & ArchitectureBit(architecture)) != 0) {
      out.emplace_back(r.field);
    }
  }
  return out;
}

}  // namespace inflight::model
