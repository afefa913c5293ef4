#include "tokenizer/word_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/embedding_bias.h"

namespace inflight::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SplitCsvWordsTest, CommasQuotesAndSpaces) {
  EXPECT_THAT(SplitCsvWords("Hello"), ElementsAre("Hello"));
  EXPECT_THAT(SplitCsvWords("a, b,c"), ElementsAre("a", " b", "c"));
  EXPECT_THAT(SplitCsvWords("\"x,y\",z"), ElementsAre("x,y", "z"));
  EXPECT_THAT(SplitCsvWords("\"say \"\"hi\"\"\""), ElementsAre("say \"hi\""));
  EXPECT_THAT(SplitCsvWords("a,,b,"), ElementsAre("a", "", "b", ""));
  EXPECT_TRUE(SplitCsvWords("").empty());
}

TEST(PackWordListsTest, FlatIdsAndCumulativeOffsets) {
  // Row 0: words [1 2] [3]; row 1: word [4 5 6] and an empty word that is skipped.
  const WordListTensor t = PackWordLists({{{1, 2}, {3}}, {{4, 5, 6}, {}}});
  ASSERT_EQ(t.batch, 2);
  ASSERT_EQ(t.width, 3);
  ASSERT_EQ(t.data.size(), 12u);
  EXPECT_THAT(t.data, ElementsAre(1, 2, 3,      // row 0 ids
                                  2, 3, -1,     // row 0 offsets
                                  4, 5, 6,      // row 1 ids
                                  3, -1, -1));  // row 1 offsets
  EXPECT_EQ(t.at(1, 1, 0), 3);
}

TEST(PackWordListsTest, NoWordsIsZeroAndMinusOne) {
  const WordListTensor t = PackWordLists({{}});
  EXPECT_EQ(t.batch, 1);
  EXPECT_EQ(t.width, 1);
  EXPECT_THAT(t.data, ElementsAre(0, -1));
  const WordListTensor mixed = PackWordLists({{}, {{7}}});
  EXPECT_THAT(mixed.data, ElementsAre(0, -1, 7, 1));
}

TEST(EmbeddingBiasTest, WeightGoesToFirstTokenOfEachWord) {
  auto bias =
      BuildEmbeddingBias({{2, 3}, {4}, {}, {2}}, std::vector<float>{1.5f, -2.0f, 9.0f, 0.25f}, 6);
  ASSERT_TRUE(bias.ok()) << bias.status().ToString();
  EXPECT_THAT(*bias, ElementsAre(0.0f, 0.0f, 1.75f, 0.0f, -2.0f, 0.0f));
}

TEST(EmbeddingBiasTest, CountMismatchAndBadIds) {
  auto mismatch = BuildEmbeddingBias({{1}, {2}}, std::vector<float>{1.0f}, 4);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(mismatch.status().message(), HasSubstr("2 words but 1 weights"));
  auto out_of_range = BuildEmbeddingBias({{4}}, std::vector<float>{1.0f}, 4);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_THAT(out_of_range.status().message(), HasSubstr("token id 4"));
}

}  // namespace
}  // namespace inflight::tokenizer
