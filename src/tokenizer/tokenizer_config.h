// transformers' tokenizer_config.json: the special token names and flags a serving tokenizer needs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/added_tokens.h"

namespace inflight::tokenizer {

struct TokenizerConfig {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> unk_token;
  std::vector<std::string> additional_special_tokens;
  // Unset: the tokenizer file's post-processor decides.
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  std::optional<bool> add_prefix_space;
  std::optional<bool> clean_up_tokenization_spaces;
  // "added_tokens_decoder": {"<id>": {"content": ..., "special": ...}}
  std::vector<AddedToken> added_tokens;
};

// Token names may be strings or {"content": ...} objects (transformers' AddedToken). A missing
// or null field stays unset.
Result<TokenizerConfig> ReadTokenizerConfig(const std::string& path);

}  // namespace inflight::tokenizer
