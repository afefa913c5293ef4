#include "tokenizer/regex_splitter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace inflight::tokenizer {
namespace {

using ::testing::ElementsAre;

std::unique_ptr<RegexSplitter> Make(std::string_view pattern, bool literal = false) {
  auto r = RegexSplitter::Create(pattern, literal);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::vector<std::string> Split(const RegexSplitter& r, std::string_view text, SplitBehavior b,
                               bool invert = false) {
  auto pieces = r.Split(text, b, invert);
  EXPECT_TRUE(pieces.ok()) << pieces.status().ToString();
  return pieces.ok() ? *pieces : std::vector<std::string>{};
}

TEST(RegexSplitterTest, Gpt2PatternSplitsWordsNumbersAndSpaces) {
  auto r = Make(kGpt2SplitPattern);
  EXPECT_THAT(Split(*r, "I'm here  now, 42!", SplitBehavior::kIsolated),
              ElementsAre("I", "'m", " here", " ", " now", ",", " 42", "!"));
  // Trailing spaces: \s+(?!\S) takes the whole run at the end.
  EXPECT_THAT(Split(*r, "a   ", SplitBehavior::kIsolated), ElementsAre("a", "   "));
  // \p{L} follows Unicode: accented and CJK letters stay in the word.
  EXPECT_THAT(Split(*r, "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD", SplitBehavior::kIsolated),
              ElementsAre("caf\xC3\xA9", " \xE4\xBD\xA0\xE5\xA5\xBD"));
}

TEST(RegexSplitterTest, BehaviorsPlaceTheDelimiter) {
  auto r = Make("-", /*literal=*/true);
  EXPECT_THAT(Split(*r, "a-b--c", SplitBehavior::kRemoved), ElementsAre("a", "b", "c"));
  EXPECT_THAT(Split(*r, "a-b--c", SplitBehavior::kIsolated),
              ElementsAre("a", "-", "b", "-", "-", "c"));
  EXPECT_THAT(Split(*r, "a-b--c", SplitBehavior::kMergedWithPrevious),
              ElementsAre("a-", "b-", "-", "c"));
  EXPECT_THAT(Split(*r, "a-b--c", SplitBehavior::kMergedWithNext),
              ElementsAre("a", "-b", "-", "-c"));
  EXPECT_THAT(Split(*r, "a-b--c", SplitBehavior::kContiguous),
              ElementsAre("a", "-", "b", "--", "c"));
}

TEST(RegexSplitterTest, InvertTreatsTheGapsAsDelimiters) {
  auto r = Make("[0-9]+");
  EXPECT_THAT(Split(*r, "ab12cd3", SplitBehavior::kRemoved, /*invert=*/true),
              ElementsAre("12", "3"));
}

TEST(RegexSplitterTest, LiteralPatternMatchesRegexCharacters) {
  auto r = Make("a.b", /*literal=*/true);
  EXPECT_THAT(Split(*r, "xa.bya-b", SplitBehavior::kIsolated), ElementsAre("x", "a.b", "ya-b"));
}

TEST(RegexSplitterTest, BadPatternNamesThePatternAndOffset) {
  auto r = RegexSplitter::Create("(unclosed", false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("(unclosed"));
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("offset"));
  EXPECT_FALSE(ParseSplitBehavior("Merged").ok());
}

TEST(RegexSplitterTest, LongWhitespaceRunIsOnePiece) {
  auto r = Make(kGpt2SplitPattern);
  const std::string spaces(200000, ' ');
  auto pieces = Split(*r, "x" + spaces + "y", SplitBehavior::kIsolated);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[1].size(), spaces.size() - 1);
  EXPECT_EQ(pieces[2], " y");
}

}  // namespace
}  // namespace inflight::tokenizer
