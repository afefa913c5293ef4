// A compiled split pattern (PCRE2 with UTF and UCP, so \p{L}, \s and friends follow Unicode as in
// Hugging Face tokenizers' Oniguruma patterns) and the split rules of the tokenizers library.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace inflight::tokenizer {

// What happens to the matched text ("delimiter"); names and meaning as tokenizers'
// SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Parses "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous".
Result<SplitBehavior> ParseSplitBehavior(std::string_view name);

// GPT-2's pre-tokenization pattern; tokenizers' ByteLevel(use_regex=true) uses the same one.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class RegexSplitter {
 public:
  // `literal` matches `pattern` as plain text (tokenizers' {"String": ...} patterns).
  static Result<std::unique_ptr<RegexSplitter>> Create(std::string_view pattern, bool literal);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // [begin, end) byte ranges of the non-empty matches, left to right. `text` must be valid UTF-8.
  Result<std::vector<std::pair<size_t, size_t>>> FindAll(std::string_view text) const;

  // Splits `text` at the matches (inverted: at the text between matches) and applies `behavior`
  // to the delimiters. Empty pieces are dropped.
  Result<std::vector<std::string>> Split(std::string_view text, SplitBehavior behavior,
                                         bool invert) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  RegexSplitter(std::string pattern, std::unique_ptr<Impl> impl);
  std::string pattern_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inflight::tokenizer
