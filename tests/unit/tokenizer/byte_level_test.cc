#include "tokenizer/byte_level.h"

#include <gtest/gtest.h>

namespace inflight::tokenizer {
namespace {

TEST(ByteLevelTest, KnownCharacters) {
  // GPT-2's alphabet: space is "Ġ" (U+0120), newline "Ċ" (U+010A), printable ASCII is itself.
  EXPECT_EQ(ByteLevelEncode(" "), "\xC4\xA0");
  EXPECT_EQ(ByteLevelEncode("\n"), "\xC4\x8A");
  EXPECT_EQ(ByteLevelEncode("Hi!"), "Hi!");
  EXPECT_EQ(ByteLevelEncode(std::string(1, '\0')), "\xC4\x80");  // U+0100, the first extra
  EXPECT_EQ(ByteLevelEncode("\xE9"), "\xC3\xA9");                // printable Latin-1 is itself
}

TEST(ByteLevelTest, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string encoded = ByteLevelEncode(all);
  auto decoded = ByteLevelDecode(encoded);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, all);
}

TEST(ByteLevelTest, CharacterOutsideTheAlphabetIsNotDecoded) {
  EXPECT_FALSE(ByteLevelDecode("\xE2\x82\xAC").has_value());  // €, U+20AC
  EXPECT_FALSE(ByteLevelDecode(" ").has_value());             // a raw space is never in a token
  EXPECT_EQ(ByteLevelDecode("<|eot_id|>"), "<|eot_id|>");
}

}  // namespace
}  // namespace inflight::tokenizer
