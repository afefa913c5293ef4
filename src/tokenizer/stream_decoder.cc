#include "tokenizer/stream_decoder.h"

#include <cstdint>

#include "common/utf8.h"

namespace inflight::tokenizer {
namespace {

bool IsLeadByte(uint8_t b) {
  return b >= 0xC2 && b <= 0xF4;
}

// The end of the last sequence that cannot grow any more: `bytes` up to a trailing sequence that
// starts with a lead byte and whose continuation bytes run to the end (the next bytes may
// complete it), or all of `bytes`.
size_t CompleteUtf8Length(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t invalid_len = 0;
    const size_t len = Utf8SequenceLength(bytes, pos, &invalid_len);
    if (len > 0) {
      pos += len;
      continue;
    }
    // NOTE: for a lead byte, invalid_len is the index of the first byte that does not continue
    // the sequence; at the end of `bytes` that byte has simply not arrived yet.
    if (IsLeadByte(static_cast<uint8_t>(bytes[pos])) && pos + invalid_len == bytes.size()) {
      return pos;
    }
    pos += invalid_len;
  }
  return bytes.size();
}

}  // namespace

size_t SettledLength(std::string_view pending, bool cleans_up_spaces) {
  size_t cut = CompleteUtf8Length(pending);
  if (!cleans_up_spaces) return cut;
  // A space byte is never inside a multi-byte sequence, so cutting at one stays a UTF-8 boundary.
  while (cut > 0) {
    const size_t window = cut >= 3 ? cut - 3 : 0;
    const size_t space = pending.substr(window, cut - window).rfind(' ');
    if (space == std::string_view::npos) break;
    cut = window + space;
  }
  return cut;
}

Result<std::string> StreamDecoder::Push(std::span<const int32_t> ids) {
  ASSIGN_OR_RETURN(std::string bytes, tokenizer_.DecodeBytes(ids, skip_special_tokens_));
  pending_ += bytes;
  const size_t cut = SettledLength(pending_, tokenizer_.cleans_up_spaces());
  if (cut == 0) return std::string();
  std::string piece = tokenizer_.BytesToText(std::string_view(pending_).substr(0, cut));
  pending_.erase(0, cut);
  text_ += piece;
  return piece;
}

std::string StreamDecoder::Finish() {
  std::string piece = tokenizer_.BytesToText(pending_);
  pending_.clear();
  text_ += piece;
  return piece;
}

}  // namespace inflight::tokenizer
