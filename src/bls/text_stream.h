// Text of a growing list of token ids, given out piece by piece so that the pieces, put together,
// are exactly the decoding of all the ids: a piece never ends inside a character that later ids
// complete.
//
// NOTE: the shape (Push(ids) -> the text those ids settle, Finish() -> the rest) is that of the
// tokenizer's StreamDecoder, which knows the byte stream behind the text and is exact where this
// one is conservative; switch to it once it is in src/tokenizer. This one decodes all the ids each
// time and holds back what may still change: trailing U+FFFD (a character cut short decodes to it
// until its last byte arrives) and, when the tokenizer cleans up spaces, a trailing space.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/tokenizer.h"

namespace inflight::bls {

class TextStream {
 public:
  TextStream(const tokenizer::Tokenizer& tokenizer, bool skip_special_tokens)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // Text that `ids` settle and that was not given out before (possibly empty).
  Result<std::string> Push(std::span<const int32_t> ids);
  // The rest: the stream ended, nothing will change the text any more.
  Result<std::string> Finish();
  // All the text given out so far (what accumulate_tokens sends each time).
  const std::string& text() const { return sent_; }

 private:
  const tokenizer::Tokenizer& tokenizer_;
  const bool skip_special_tokens_;
  std::vector<int32_t> ids_;
  std::string sent_;  // the text given out so far: always a prefix of the decoding of ids_
};

}  // namespace inflight::bls
