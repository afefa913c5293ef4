// Where a stream of token ids may be cut so that each part, decoded alone, gives its own part of
// the whole text: Decode(a) + Decode(b) == Decode(a + b) for every cut this class lets through.
//
// NOTE: this is how streamed text stays whole through NVIDIA's ensemble. There the postprocessing
// model sees each streamed response as a request of its own (TOKENS_BATCH holds only the new ids,
// no earlier context, and any postprocessing instance may take it), so it cannot keep a decoder's
// state. Instead the LLM model (src/backend), which sees the whole stream, holds back ids whose
// bytes end inside a UTF-8 character (or where the space clean-up could still change the text)
// until later ids settle them. The ids and their order do not change, only which response carries
// them; the final response carries whatever is still held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/tokenizer.h"

namespace inflight::tokenizer {

class TokenBoundary {
 public:
  // `tokenizer` must outlive this object.
  explicit TokenBoundary(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // Puts `ids` behind the ids held so far and returns how many of them, counted from the first
  // held id, may go out now; those are no longer held. The cut is settled both for a decoder that
  // skips special tokens and for one that keeps them (the postprocessing model's
  // skip_special_tokens is not known here). An id outside the vocabulary cannot be judged: all
  // held ids go out (the postprocessing model then reports the id).
  size_t Push(std::span<const int32_t> ids);

  // Number of ids held back.
  size_t held() const { return held_ids_.size(); }

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> held_ids_;
};

}  // namespace inflight::tokenizer
