// GPT-2's byte-level alphabet: every byte is shown as one printable code point so that BPE
// vocabularies never contain raw control bytes or spaces ("Ġ" is the space byte).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace inflight::tokenizer {

// Each byte of `bytes` replaced by its byte-level code point (UTF-8 encoded).
std::string ByteLevelEncode(std::string_view bytes);

// The bytes a byte-level token stands for; nullopt when some code point of `token` is not in the
// byte-level alphabet (or `token` is not valid UTF-8).
std::optional<std::string> ByteLevelDecode(std::string_view token);

}  // namespace inflight::tokenizer
