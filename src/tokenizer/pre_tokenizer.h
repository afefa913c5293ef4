// Pre-tokenization: raw text → pieces that BPE encodes independently. Covers tokenizers'
// ByteLevel (GPT-2) and Sequence[Split(regex), ByteLevel(use_regex=false)] (Llama-3, Qwen2).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/regex_splitter.h"

namespace inflight::tokenizer {

class PreTokenizer {
 public:
  // tokenizers' Split pre-tokenizer.
  void AddSplit(std::shared_ptr<const RegexSplitter> regex, SplitBehavior behavior, bool invert);
  // tokenizers' ByteLevel pre-tokenizer: optional leading space, optional GPT-2 regex split. The
  // byte mapping itself is applied to every final piece by Pieces().
  Status AddByteLevel(bool add_prefix_space, bool use_regex);

  // Splits `text` (valid UTF-8) into pieces, still raw UTF-8 (not byte-level mapped).
  Result<std::vector<std::string>> Pieces(std::string_view text) const;

  bool empty() const { return steps_.empty(); }

 private:
  struct Step {
    std::shared_ptr<const RegexSplitter> regex;  // null: no split in this step
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  std::vector<Step> steps_;
};

}  // namespace inflight::tokenizer
