// What a tokenizer file loader produces and Tokenizer runs on. Internal to src/tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pre_tokenizer.h"

namespace inflight::tokenizer {

struct TokenizerParts {
  std::unique_ptr<BpeModel> model;
  std::vector<AddedToken> added_tokens;
  PreTokenizer pre_tokenizer;
  // Ids the post-processor puts around the text when add_special_tokens is true.
  std::vector<int32_t> prefix_ids;
  std::vector<int32_t> suffix_ids;
  // transformers' clean_up_tokenization_spaces (" ." → "." and similar) after decoding.
  bool clean_up_tokenization_spaces = false;
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  std::optional<int32_t> pad_id;
};

// Hugging Face tokenizer.json (model type BPE with a ByteLevel pre-tokenizer).
Result<TokenizerParts> LoadTokenizerJson(const std::string& path);

// GPT-2's vocab.json + merges.txt (or the same content as encoder.json + vocab.bpe).
Result<TokenizerParts> LoadGpt2Files(const std::string& vocab_path, const std::string& merges_path);

}  // namespace inflight::tokenizer
