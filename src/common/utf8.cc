#include "common/utf8.h"

#include <cstdint>

namespace inflight {
namespace {

bool InRange(uint8_t b, uint8_t lo, uint8_t hi) {
  return b >= lo && b <= hi;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view text, size_t pos, size_t* invalid_len) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  if (lead < 0x80) return 1;
  size_t need = 0;
  // The accepted range of the second byte depends on the lead byte: it excludes overlong forms,
  // surrogates (ED A0..BF) and code points above U+10FFFF (Unicode table 3-7).
  uint8_t second_lo = 0x80, second_hi = 0xBF;
  if (InRange(lead, 0xC2, 0xDF)) {
    need = 1;
  } else if (InRange(lead, 0xE0, 0xEF)) {
    need = 2;
    if (lead == 0xE0) second_lo = 0xA0;
    if (lead == 0xED) second_hi = 0x9F;
  } else if (InRange(lead, 0xF0, 0xF4)) {
    need = 3;
    if (lead == 0xF0) second_lo = 0x90;
    if (lead == 0xF4) second_hi = 0x8F;
  } else {
    if (invalid_len) *invalid_len = 1;
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    const size_t i = pos + k;
    const bool ok = i < text.size() && (k == 1 ? InRange(byte(i), second_lo, second_hi)
                                               : InRange(byte(i), 0x80, 0xBF));
    if (!ok) {
      if (invalid_len) *invalid_len = k;
      return 0;
    }
  }
  return need + 1;
}

std::optional<size_t> FindInvalidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t len = Utf8SequenceLength(text, pos);
    if (len == 0) return pos;
    pos += len;
  }
  return std::nullopt;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t invalid_len = 0;
    const size_t len = Utf8SequenceLength(bytes, pos, &invalid_len);
    if (len > 0) {
      out.append(bytes.substr(pos, len));
      pos += len;
    } else {
      out.append("\xEF\xBF\xBD");
      pos += invalid_len;
    }
  }
  return out;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace inflight
