// A Hugging Face config.json → EngineConfig, in both layouts transformers writes:
//   4.x: "rope_theta", "rope_scaling" ({"type" | "rope_type": ...}), "torch_dtype"
//   5.x: "rope_parameters" ({"rope_type", "rope_theta", ...}), "dtype"
// for LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and GPT2LMHeadModel.
//
// The rule: every field that changes what transformers' model computes is honoured (computed the
// same way) or refused with an error naming the field, its value and what is supported. The
// fields and what happens to each are listed in HfFieldRules() (and docs/hf_config.md); keys
// the converter does not read at all come back in HfConfigReading::unread_keys for the build log.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"
#include "model/engine_config.h"
#include "model/hf_quant_config.h"

namespace inflight::model {

struct HfConfigReading {
  // Build limits default (max_seq_len kept within max_position_embeddings), tp_size 1; dtype
  // config_dtype, else float32; attention_windows as config.json sets them (not yet cut to a
  // max_seq_len: CanonicalizeAttentionWindows).
  EngineConfig config;
  // "dtype" (5.x) or "torch_dtype" (4.x; "dtype" wins when both are present, as in transformers 5's
  // PreTrainedConfig.__post_init__); nullopt when neither is.
  std::optional<DType> config_dtype;
  std::string config_dtype_text;  // the value as written ("" when absent), for errors
  // Keys the converter did not read, sorted, beyond those the field table marks as having no
  // effect; keys inside the rope object are prefixed ("rope_scaling.finetuned").
  std::vector<std::string> unread_keys;
  // config.json's quantization_config (format kNone without one); config.quant is its engine
  // settings. ModelOpt's hf_quant_config.json is a file of its own: the builder reads it.
  CheckpointQuantization checkpoint_quant;
};

Result<HfConfigReading> ReadHuggingFaceConfig(const std::string& hf_config_json_text,
                                              const std::string& origin);

// ReadHuggingFaceConfig(...).config.
Result<EngineConfig> EngineConfigFromHuggingFace(const std::string& hf_config_json_text,
                                                 const std::string& origin);

// One row of the field table: what the converter does with `field` for the architectures in
// `architectures` (a bit per Architecture, ArchitectureBit).
enum class HfFieldUse : std::uint8_t {
  kHonoured,  // every value transformers accepts is computed as transformers computes it
  kPartly,    // the values in `rule` are honoured; any other value is refused by name
  kNoEffect,  // transformers reads it, but it changes nothing at inference (dropout, init, flags)
};
struct HfFieldRule {
  std::string_view field;
  std::uint32_t architectures;
  HfFieldUse use;
  std::string_view rule;  // what is honoured or refused, and the transformers source of the rule
};

constexpr std::uint32_t ArchitectureBit(Architecture a) {
  return 1u << static_cast<unsigned>(a);
}

// The table, in the order of docs/hf_config.md.
std::span<const HfFieldRule> HfFieldRules();
// The kNoEffect fields of `architecture`: read by no accessor, never listed as unread.
std::vector<std::string> NoEffectHfFields(Architecture architecture);

}  // namespace inflight::model
