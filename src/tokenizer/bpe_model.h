// The BPE model: vocabulary, merge ranks, and the merge loop over one pre-tokenized piece.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace inflight::tokenizer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
  // tokenizers' ignore_merges (Llama-3): a piece that is itself in the vocabulary is one token.
  bool ignore_merges = false;
  // Token for characters missing from the vocabulary; without one such a piece is an error.
  std::optional<int32_t> unk_id;
};

class BpeModel {
 public:
  // `merges` in rank order (first = merged first). `source` names the file in error messages.
  static Result<std::unique_ptr<BpeModel>> Create(
      Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      BpeOptions options, const std::string& source);

  // Appends the ids of one piece, already mapped to the byte-level alphabet.
  Status Encode(std::string_view piece, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // nullptr when no vocabulary entry has this id.
  const std::string* IdToToken(int32_t id) const;
  // One past the largest id in the vocabulary.
  int32_t id_end() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  BpeModel() = default;
  Status MergePiece(std::string_view piece, std::vector<int32_t>* ids) const;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  Vocab vocab_;
  std::vector<const std::string*> id_to_token_;  // points into vocab_ keys
  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions options_;

  // Pieces repeat a lot in real text; the cache makes repeated words a hash lookup.
  static constexpr size_t kMaxCacheEntries = 1 << 16;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace inflight::tokenizer
