#include "common/utf8.h"

#include <gtest/gtest.h>

namespace inflight::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// Expected strings are what CPython 3 gives for bytes.decode("utf-8", errors="replace"): one
// U+FFFD per maximal subpart of an ill-formed sequence.
TEST(Utf8LossyTest, KeepsValidText) {
  const std::string text = "plain ascii, caf\xC3\xA9, \xE4\xBD\xA0\xE5\xA5\xBD, \xF0\x9F\x98\x80";
  EXPECT_EQ(Utf8Lossy(text), text);
  EXPECT_FALSE(FindInvalidUtf8(text).has_value());
}

TEST(Utf8LossyTest, TruncatedSequenceIsOneReplacement) {
  EXPECT_EQ(Utf8Lossy("\xE4\xBD"), kFffd);      // first two bytes of 你
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98"), kFffd);  // first three bytes of 😀
  EXPECT_EQ(Utf8Lossy("\xE4\xBD"
                      "a"),
            kFffd + "a");  // cut short by an ASCII byte
  EXPECT_EQ(Utf8Lossy("x\xF0\x9F"), "x" + kFffd);
}

TEST(Utf8LossyTest, EachStrayByteIsOneReplacement) {
  EXPECT_EQ(Utf8Lossy("\x80"), kFffd);
  EXPECT_EQ(Utf8Lossy("\xA0\xA0"), kFffd + kFffd);
  EXPECT_EQ(Utf8Lossy("\xFF"
                      "b"),
            kFffd + "b");
  // Overlong forms and surrogates are ill-formed at their second byte.
  EXPECT_EQ(Utf8Lossy("\xC0\xAF"), kFffd + kFffd);
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);
  EXPECT_EQ(Utf8Lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);
  EXPECT_EQ(Utf8Lossy("\xE0\x80\x80"), kFffd + kFffd + kFffd);
}

TEST(Utf8LossyTest, FindInvalidGivesTheOffset) {
  EXPECT_EQ(FindInvalidUtf8("abc\xFF"), 3u);
  EXPECT_EQ(FindInvalidUtf8("\xC3\xA9\xC3"), 2u);
  EXPECT_EQ(FindInvalidUtf8(""), std::nullopt);
}

TEST(Utf8Test, AppendUtf8EncodesEachLength) {
  std::string s;
  for (char32_t cp : {U'A', U'\u00E9', U'\u4F60', U'\U0001F600'}) AppendUtf8(cp, &s);
  EXPECT_EQ(s, "A\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace inflight::tokenizer
