// Added tokens (specials such as <|endoftext|>, and any token added after training): they are cut
// out of the text before pre-tokenization and map to their id directly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace inflight::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;  // skipped by Decode(skip_special_tokens=true)
  bool lstrip = false;   // the match swallows whitespace on its left
  bool rstrip = false;   // the match swallows whitespace on its right
};

// A stretch of text: either an added token (id >= 0) or plain text to pre-tokenize (id < 0).
struct TextSegment {
  std::string_view text;
  int32_t id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // Splits `text` at added tokens, leftmost match first and the longest token at one position.
  std::vector<TextSegment> Split(std::string_view text) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  // First byte → indices into tokens_, longest content first.
  std::unordered_map<char, std::vector<size_t>> by_first_byte_;
};

}  // namespace inflight::tokenizer
