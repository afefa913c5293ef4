// The per-architecture halves of ReadHuggingFaceConfig (hf_config.cc), one file each. Internal to
// the model library.
#pragma once

#include <string>
#include <vector>

#include "inflight/status.h"
#include "model/engine_config.h"
#include "model/json_fields.h"

namespace inflight::model {

// Llama, Mistral, Qwen2, Qwen3 (hf_config_llama.cc): dimensions, norm, activation, biases, RoPE,
// q/k norm and attention windows. c->architecture is set; vocab_size, dtype, token ids and
// tie_word_embeddings are read by the caller. Keys read inside the rope object that it does not
// use are appended to `unread` ("rope_scaling.x").
Status ReadLlamaFamilyConfig(const JsonFields& f, EngineConfig* c,
                             std::vector<std::string>* unread);

// GPT2LMHeadModel (hf_config_gpt2.cc), under the same contract.
Status ReadGpt2Config(const JsonFields& f, EngineConfig* c);

// RoPE from either layout (hf_rope.cc): rope_scaling (4.x) or rope_parameters (5.x), rope_theta,
// partial_rotary_factor and original_max_position_embeddings, with transformers 5's precedence
// and defaults. Needs c.max_position_embeddings, c.head_dim and c.attention_windows (a
// per-layer-type rope object is read for the layer types in use).
Status ReadHfRope(const JsonFields& f, const EngineConfig& c, RopeConfig* rope,
                  std::vector<std::string>* unread);

}  // namespace inflight::model
