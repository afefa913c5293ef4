// Incremental detokenization: the text of a growing list of token ids, given out in pieces whose
// concatenation is exactly Tokenizer::Decode of all the ids. A piece never ends inside a UTF-8
// character that later ids complete (GPT-2 ids 19526 then 254 give "你", not two U+FFFD), nor
// where the tokenizer's space clean-up (" ." -> ".", " 's" -> "'s") could still join it to the
// next piece.
//
//   bytes of the ids so far:  [ given out as text ......... | pending ]
//                                                           ^ a settled cut: the text of the
//   left part is final whatever bytes come next, so Decode(all) = text(left) + text(right).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "tokenizer/tokenizer.h"

namespace inflight::tokenizer {

// The longest prefix of `pending` that can be turned into text now, when the bytes before
// `pending` ended at a settled cut. A cut is settled when
//  - it is not inside a UTF-8 sequence that the next bytes may still complete (a lead byte and
//    valid continuation bytes running to the end are held; an ill-formed part is not: it decodes
//    to U+FFFD whatever follows), and
//  - with `cleans_up_spaces`, no space is among the 3 bytes before it. Every clean-up rule deletes
//    spaces only and starts with a space followed by at most 3 ASCII characters, so a match can
//    straddle the cut only from a space in those 3 bytes.
size_t SettledLength(std::string_view pending, bool cleans_up_spaces);

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // The text that `ids` settle and that was not given out before (possibly empty). An id outside
  // the vocabulary is InvalidArgument (as Decode) and changes nothing.
  Result<std::string> Push(std::span<const int32_t> ids);
  // The rest: the stream ended. A character still cut short becomes U+FFFD, as in Decode.
  std::string Finish();
  // All the text given out so far.
  const std::string& text() const { return text_; }

 private:
  const Tokenizer& tokenizer_;
  const bool skip_special_tokens_;
  std::string pending_;  // bytes after the last settled cut
  std::string text_;
};

}  // namespace inflight::tokenizer
