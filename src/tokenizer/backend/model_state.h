// What a preprocessing or postprocessing model needs after loading: its role (from its inputs),
// the tokenizer and the flags, parsed from the model configuration Triton hands the backend.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/host_tensor.h"
#include "tokenizer/tokenizer.h"

namespace inflight::tokenizer::backend {

enum class TextModelRole { kPreprocessing, kPostprocessing };

struct TextModelState {
  std::string name;
  TextModelRole role = TextModelRole::kPreprocessing;
  bool batched = true;              // max_batch_size > 0
  bool add_special_tokens = true;   // parameter add_special_tokens (preprocessing)
  bool skip_special_tokens = true;  // parameter skip_special_tokens (postprocessing)
  std::string tokenizer_dir;
  std::unique_ptr<Tokenizer> tokenizer;

  // Runs the role's conversion. An empty `requested` means every output of the role.
  Result<std::vector<HostTensor>> Run(const std::vector<HostTensor>& inputs,
                                      std::vector<std::string> requested) const;
};

// `config_json`: the model configuration as TRITONBACKEND_ModelConfig gives it. A model with input
// QUERY is preprocessing, one with TOKENS_BATCH postprocessing. Parameter tokenizer_dir is
// required; errors name the model and the parameter or the folder that does not load.
Result<std::unique_ptr<TextModelState>> CreateTextModelState(const std::string& model_name,
                                                             std::string_view config_json);

}  // namespace inflight::tokenizer::backend
