// The engine's config.json (docs/engine_format.md) as a struct, and how a Hugging Face config.json
// maps to it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"

namespace inflight::model {

enum class Architecture : std::uint8_t { kLlama, kMistral, kQwen2, kGpt2 };
enum class NormKind : std::uint8_t { kRmsNorm, kLayerNorm };
enum class Activation : std::uint8_t { kSwiGlu, kGeluNew };
enum class PositionEmbedding : std::uint8_t { kRope, kLearned };

struct RopeScaling {  // "llama3" type only
  float factor = 8.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  std::int64_t original_max_position_embeddings = 8192;
};

struct BuildLimits {
  std::int32_t max_batch_size = 256;
  std::int32_t max_input_len = 1024;
  std::int32_t max_seq_len = 2048;
  std::int32_t max_num_tokens = 8192;
  std::int32_t tokens_per_block = 64;
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
  float rope_theta = 10000.0f;
  std::optional<RopeScaling> rope_scaling;
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

Result<EngineConfig> LoadEngineConfig(const std::string& engine_dir);  // reads <dir>/config.json
Status SaveEngineConfig(const EngineConfig& config, const std::string& engine_dir);
std::string EngineConfigToJson(const EngineConfig& config);
Result<EngineConfig> EngineConfigFromJson(const std::string& json_text, const std::string& origin);

// Maps a Hugging Face config.json (one of the four supported architectures) to an EngineConfig; an
// unknown architecture is an error naming it and the supported ones. Build limits and parallelism
// are left default.
Result<EngineConfig> EngineConfigFromHuggingFace(const std::string& hf_config_json_text,
                                                 const std::string& origin);

}  // namespace inflight::model
