// The engine's config.json (docs/engine_format.md) as a struct. How a Hugging Face config.json maps
// to it: model/hf_config.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"
#include "model/quant_config.h"
#include "model/rope_config.h"

namespace inflight::model {

enum class Architecture : std::uint8_t { kLlama, kMistral, kQwen2, kQwen3, kGpt2 };
enum class NormKind : std::uint8_t { kRmsNorm, kLayerNorm };
enum class Activation : std::uint8_t { kSwiGlu, kGeluNew };
enum class PositionEmbedding : std::uint8_t { kRope, kLearned };

struct BuildLimits {
  std::int32_t max_batch_size = 256;
  std::int32_t max_input_len = 1024;
  std::int32_t max_seq_len = 2048;
  std::int32_t max_num_tokens = 8192;
  std::int32_t tokens_per_block = 64;
};

// Weights made at load instead of read from rank files (inflight-build --random_preset P
// --weights_at_load): the random checkpoint of preset P and seed S, its max_position_embeddings the
// engine's. Each process makes the bytes its rank<N>.safetensors would hold (model/random_engine.h
// WriteRandomRankFile), so the engine directory holds config.json alone.
struct RandomWeightsRecipe {
  std::string preset;
  std::uint64_t seed = 0;
};

struct EngineConfig {
  std::string architecture_name;  // as in HF: "LlamaForCausalLM", ...
  Architecture architecture = Architecture::kLlama;
  DType dtype = DType::kFloat32;
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t intermediate_size = 0;
  NormKind norm = NormKind::kRmsNorm;
  float norm_eps = 1e-5f;
  Activation activation = Activation::kSwiGlu;
  PositionEmbedding position_embedding = PositionEmbedding::kRope;
  std::int64_t max_position_embeddings = 2048;
  RopeConfig rope;  // position_embedding kRope only
  bool qkv_bias = false;
  bool attn_out_bias = false;
  bool mlp_bias = false;
  bool norm_bias = false;
  bool tie_word_embeddings = false;
  // Qwen3: each query and key head is RMS-normalised over head_dim (weights layers.{i}.q_norm and
  // layers.{i}.k_norm, [head_dim], eps norm_eps) before the rotary embedding.
  bool qk_norm = false;
  // Per layer, the number of most recent keys a query attends to (itself included): key j is
  // visible to query i when i - window < j <= i. 0: full causal attention. Empty: every layer full.
  std::vector<std::int64_t> attention_windows;
  std::optional<std::int32_t> bos_token_id;
  std::optional<std::int32_t> eos_token_id;
  BuildLimits build;
  std::int32_t tp_size = 1;
  std::int32_t pp_size = 1;
  // Quantized linears and KV cache (docs/engine_format.md, "Quantization"); none by default.
  QuantConfig quant;
  std::optional<RandomWeightsRecipe> random_weights;

  // Number of (query, key, value) rows of the fused qkv weight on one rank.
  std::int64_t QkvRows(std::int32_t tp) const {
    return (num_attention_heads / tp + 2 * LocalKvHeads(tp)) * head_dim;
  }
  std::int64_t LocalKvHeads(std::int32_t tp) const {
    return num_kv_heads >= tp ? num_kv_heads / tp : 1;
  }

  // The window of `layer` (0: full attention).
  std::int64_t AttentionWindow(std::int64_t layer) const {
    return attention_windows.empty() ? 0 : attention_windows[static_cast<std::size_t>(layer)];
  }

  Status Validate() const;  // dims positive, heads divide, tp divides heads, limits consistent
};

// "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel".
const char* SupportedArchitectures();
std::optional<Architecture> ParseArchitecture(std::string_view name);

// A window no shorter than build.max_seq_len keeps every key a sequence can have, so it is full
// attention: such windows become 0, and a list of zeros becomes empty.
void CanonicalizeAttentionWindows(EngineConfig* config);

Result<EngineConfig> LoadEngineConfig(const std::string& engine_dir);  // reads <dir>/config.json
Status SaveEngineConfig(const EngineConfig& config, const std::string& engine_dir);
// The engine format, version 2 (docs/engine_format.md); version 1 (rope_theta and a llama3-only
// rope_scaling) is still read.
std::string EngineConfigToJson(const EngineConfig& config);
Result<EngineConfig> EngineConfigFromJson(const std::string& json_text, const std::string& origin);

}  // namespace inflight::model
