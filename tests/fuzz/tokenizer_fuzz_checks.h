// What every tokenizer must do with any text and any id list, shared by the tokenizer fuzzers:
// the properties are the Tokenizer and StreamDecoder contracts (tokenizer.h, stream_decoder.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "common/utf8.h"

namespace inflight::tokenizer::fuzz {

[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "tokenizer fuzz check failed: %s\n", what.c_str());
  std::abort();
}

// Encode refuses invalid UTF-8 and gives ids inside the vocabulary. With `complete` (a real
// tokenizer: every byte has a token, no Split removes text, no added token strips spaces) it
// accepts all valid UTF-8, and without the post-processor's ids the raw bytes of the ids are the
// text again: byte-level BPE loses nothing.
inline void CheckEncode(const Tokenizer& tokenizer, std::string_view text, bool add_special,
                        bool complete) {
  auto ids = tokenizer.Encode(text, add_special);
  const bool valid = !FindInvalidUtf8(text).has_value();
  if (!valid && ids.ok()) Fail("Encode accepted invalid UTF-8");
  if (complete && valid && !ids.ok()) {
    Fail("Encode refused valid UTF-8: " + ids.status().message());
  }
  if (!ids.ok()) return;
  for (int32_t id : *ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) {
      Fail("Encode gave id " + std::to_string(id) + " outside the vocabulary of " +
           std::to_string(tokenizer.vocab_size()));
    }
  }
  if (add_special || !complete) return;
  auto bytes = tokenizer.DecodeBytes(*ids, /*skip_special_tokens=*/false);
  if (!bytes.ok()) Fail("DecodeBytes of Encode's ids failed: " + bytes.status().message());
  if (*bytes != text) Fail("DecodeBytes(Encode(text)) is not the text");
}

// Decode fails exactly when an id is outside [0, vocab_size) or names no token, and otherwise
// gives valid UTF-8; a StreamDecoder fed the same ids in pieces gives the same text.
inline void CheckDecode(const Tokenizer& tokenizer, std::span<const int32_t> ids, bool skip_special,
                        std::size_t piece) {
  auto text = tokenizer.Decode(ids, skip_special);
  bool in_range = true;
  for (int32_t id : ids) in_range &= id >= 0 && id < tokenizer.vocab_size();
  if (!in_range && text.ok()) Fail("Decode accepted an id outside the vocabulary");
  if (!text.ok()) {
    if (text.status().message().find("token id") == std::string::npos) {
      Fail("Decode error does not name the id: " + text.status().message());
    }
    return;
  }
  if (FindInvalidUtf8(*text)) Fail("Decode gave invalid UTF-8");
  StreamDecoder stream(tokenizer, skip_special);
  std::string streamed;
  for (std::size_t i = 0; i < ids.size(); i += piece) {
    auto part = stream.Push(ids.subspan(i, std::min(piece, ids.size() - i)));
    if (!part.ok()) Fail("StreamDecoder refused ids that Decode took: " + part.status().message());
    streamed += *part;
  }
  streamed += stream.Finish();
  if (streamed != *text) Fail("StreamDecoder's pieces are not Decode's text");
}

}  // namespace inflight::tokenizer::fuzz
