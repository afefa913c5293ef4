// Byte-level BPE tokenizer (GPT-2, Llama-3, Qwen2 family) loaded from a Hugging Face tokenizer
// folder. Encode/Decode give the ids and text of transformers' AutoTokenizer for these files.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace inflight::tokenizer {

struct TokenizerParts;
class AddedTokenMatcher;

class Tokenizer {
 public:
  // `dir` holds tokenizer.json, or vocab.json + merges.txt, or encoder.json + vocab.bpe (tried in
  // that order), and optionally tokenizer_config.json (special token names, add_bos_token, ...).
  static Result<std::unique_ptr<Tokenizer>> Load(const std::string& dir);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // `text` must be valid UTF-8 (InvalidArgument naming the offset otherwise). Added and special
  // tokens written in the text become their single id. add_special_tokens adds what the
  // post-processor adds (BOS for Llama-3 style templates, nothing for GPT-2).
  Result<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens) const;

  // Text of `ids`; a multi-byte character cut between tokens becomes U+FFFD per invalid sequence,
  // exactly as Python's bytes.decode(errors="replace"). An id outside [0, vocab_size()) is
  // InvalidArgument naming the id and the vocabulary size.
  Result<std::string> Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // Decode in two halves, for decoders that cut a stream (stream_decoder.h): the raw bytes the
  // ids stand for, then the text of such bytes (UTF-8 repair, then the space clean-up when
  // cleans_up_spaces()). Decode(ids) == BytesToText(DecodeBytes(ids)).
  Result<std::string> DecodeBytes(std::span<const int32_t> ids, bool skip_special_tokens) const;
  std::string BytesToText(std::string_view bytes) const;
  // transformers' clean_up_tokenization_spaces from tokenizer_config.json (" ." -> "." ...).
  bool cleans_up_spaces() const;

  // Id of a vocabulary or added token, spelled as stored (byte-level, e.g. "Ġthe").
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Whether `id` is an added token marked special (skipped by Decode(..., true)).
  bool IsSpecial(int32_t id) const;

  // Number of ids, added tokens included (transformers' len(tokenizer)).
  int32_t vocab_size() const { return vocab_size_; }
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> pad_id() const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerParts> parts);
  static Result<std::unique_ptr<Tokenizer>> LoadUnchecked(const std::string& dir);

  std::unique_ptr<TokenizerParts> parts_;
  std::unique_ptr<AddedTokenMatcher> matcher_;
  std::unordered_map<int32_t, size_t> added_by_id_;  // id → index in parts_->added_tokens
  int32_t vocab_size_ = 0;
};

}  // namespace inflight::tokenizer
