// The tensorrt_llm_bls model's configuration: NVIDIA's template keys (accumulate_tokens,
// tensorrt_llm_model_name, tensorrt_llm_draft_model_name, multimodal_encoders_name) and where the
// tokenizer comes from.
#pragma once

#include <string>

#include "common/status.h"
#include "model_config.pb.h"

namespace inflight::bls {

struct BlsConfig {
  std::string model_name;
  bool batched = true;     // max_batch_size > 0: every tensor has a leading batch dim
  bool decoupled = false;  // model_transaction_policy.decoupled: needed for streaming
  // Streaming: each response holds the text of every token so far, not only the new ones.
  bool accumulate_tokens = false;
  std::string llm_model_name = "tensorrt_llm";
  // NOTE: the draft-model speculative path (a draft model proposing tokens the target checks)
  // comes with the speculative decoding issue; a configured draft model is refused until then.
  std::string draft_model_name;
  // The tokenizer: the BLS model's own tokenizer_dir parameter, else the one of the `preprocessing`
  // model beside it in the repository (the model NVIDIA's BLS calls for tokenization), with that
  // model's add_special_tokens and the `postprocessing` model's skip_special_tokens.
  std::string tokenizer_dir;
  bool add_special_tokens = true;
  bool skip_special_tokens = true;
  // Outputs the configuration declares, by name: only these are answered.
  std::vector<std::string> outputs;
};

// `repository_path` is the model's folder (<repository>/<model>, TRITONBACKEND_ModelRepository).
Result<BlsConfig> LoadBlsConfig(const inference::ModelConfig& config,
                                const std::string& repository_path);

}  // namespace inflight::bls
