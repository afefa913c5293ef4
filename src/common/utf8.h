// UTF-8 validation and lossy decoding with the same replacement rule as Python's
// bytes.decode("utf-8", errors="replace") and Rust's String::from_utf8_lossy (which Hugging Face
// tokenizers use): one U+FFFD per maximal invalid subpart (Unicode 15, section 3.9, U+FFFD policy).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace inflight {

// Length of the well-formed UTF-8 sequence that starts at text[pos], or 0 when the bytes there
// do not start one. When 0 is returned, *invalid_len (if given) is the length of the maximal
// subpart to replace with one U+FFFD (at least 1).
size_t Utf8SequenceLength(std::string_view text, size_t pos, size_t* invalid_len = nullptr);

// Byte offset of the first ill-formed sequence, or nullopt when all of `text` is valid UTF-8.
std::optional<size_t> FindInvalidUtf8(std::string_view text);

// `bytes` with every maximal ill-formed subpart replaced by U+FFFD (EF BF BD).
std::string Utf8Lossy(std::string_view bytes);

// Appends the UTF-8 encoding of `code_point` (<= 0x10FFFF) to `out`.
void AppendUtf8(char32_t code_point, std::string* out);

}  // namespace inflight
