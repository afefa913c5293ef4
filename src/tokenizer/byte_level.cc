#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "common/utf8.h"

namespace inflight::tokenizer {
namespace {

constexpr char32_t kNoByte = 0xFFFFFFFF;

// The table of GPT-2's bytes_to_unicode(): printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
// stand for themselves; the other 68 bytes take code points 256, 257, ... in byte order.
struct Tables {
  std::array<std::string, 256> byte_to_utf8;
  std::array<uint8_t, 512> code_point_to_byte{};
  std::array<bool, 512> has_byte{};

  Tables() {
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp = printable ? static_cast<char32_t>(b) : next_extra++;
      AppendUtf8(cp, &byte_to_utf8[b]);
      code_point_to_byte[cp] = static_cast<uint8_t>(b);
      has_byte[cp] = true;
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

// Decodes the code point at text[*pos] (which must be valid UTF-8) and advances *pos.
char32_t NextCodePoint(std::string_view text, size_t* pos) {
  const size_t len = Utf8SequenceLength(text, *pos);
  if (len == 0) {
    ++*pos;
    return kNoByte;
  }
  const auto b0 = static_cast<uint8_t>(text[*pos]);
  char32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[*pos + k]) & 0x3F);
  *pos += len;
  return cp;
}

}  // namespace

std::string ByteLevelEncode(std::string_view bytes) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.byte_to_utf8[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> ByteLevelDecode(std::string_view token) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const char32_t cp = NextCodePoint(token, &pos);
    if (cp >= t.has_byte.size() || !t.has_byte[cp]) return std::nullopt;
    out.push_back(static_cast<char>(t.code_point_to_byte[cp]));
  }
  return out;
}

}  // namespace inflight::tokenizer
