#include "tokenizer/bpe_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace inflight::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Merges = std::vector<std::pair<std::string, std::string>>;

Vocab SmallVocab() {
  return {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
}

std::vector<int32_t> Encode(const BpeModel& model, std::string_view piece) {
  std::vector<int32_t> ids;
  Status st = model.Encode(piece, &ids);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return ids;
}

TEST(BpeModelTest, LowerRankMergesFirst) {
  // "b c" outranks "a b", so "abc" becomes a + bc, then "a bc" → abc.
  auto first = BpeModel::Create(SmallVocab(), Merges{{"b", "c"}, {"a", "b"}, {"a", "bc"}}, {}, "t");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_THAT(Encode(**first, "abc"), ElementsAre(5));
  // With "a b" first the same text stops at ab + c: there is no "ab c" merge.
  auto second =
      BpeModel::Create(SmallVocab(), Merges{{"a", "b"}, {"b", "c"}, {"a", "bc"}}, {}, "t");
  ASSERT_TRUE(second.ok());
  EXPECT_THAT(Encode(**second, "abc"), ElementsAre(3, 2));
  // Equal ranks merge left to right; a pair with no merge stays apart.
  EXPECT_THAT(Encode(**second, "ababc"), ElementsAre(3, 3, 2));
  EXPECT_THAT(Encode(**second, "cbcb"), ElementsAre(2, 4, 1));
}

TEST(BpeModelTest, CachedResultEqualsFirstResult) {
  auto model = BpeModel::Create(SmallVocab(), Merges{{"b", "c"}, {"a", "bc"}}, {}, "t");
  ASSERT_TRUE(model.ok());
  const auto first = Encode(**model, "abcab");
  EXPECT_THAT(first, ElementsAre(5, 0, 1));
  EXPECT_EQ(Encode(**model, "abcab"), first);
}

TEST(BpeModelTest, IgnoreMergesTakesWholeVocabularyPieces) {
  BpeOptions options;
  options.ignore_merges = true;
  auto model = BpeModel::Create(SmallVocab(), Merges{{"a", "b"}}, options, "t");
  ASSERT_TRUE(model.ok());
  EXPECT_THAT(Encode(**model, "abc"), ElementsAre(5));         // in the vocabulary as a whole
  EXPECT_THAT(Encode(**model, "abca"), ElementsAre(3, 2, 0));  // not: merges apply
}

TEST(BpeModelTest, UnknownCharacter) {
  auto strict = BpeModel::Create(SmallVocab(), Merges{}, {}, "t");
  ASSERT_TRUE(strict.ok());
  std::vector<int32_t> ids;
  Status st = (*strict)->Encode("abz", &ids);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("\"z\""));
  BpeOptions options;
  options.unk_id = 2;
  auto lenient = BpeModel::Create(SmallVocab(), Merges{}, options, "t");
  ASSERT_TRUE(lenient.ok());
  EXPECT_THAT(Encode(**lenient, "az"), ElementsAre(0, 2));
}

TEST(BpeModelTest, MergeOutsideVocabularyIsAnError) {
  auto model = BpeModel::Create(SmallVocab(), Merges{{"a", "b"}, {"c", "a"}}, {}, "merges.txt");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("merges.txt"));
  EXPECT_THAT(model.status().message(), HasSubstr("merge 1"));
  EXPECT_THAT(model.status().message(), HasSubstr("\"ca\""));
}

TEST(BpeModelTest, DuplicateIdIsAnError) {
  Vocab vocab = SmallVocab();
  vocab["d"] = 3;
  auto model = BpeModel::Create(std::move(vocab), Merges{}, {}, "vocab.json");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("id 3"));
}

TEST(BpeModelTest, LongPieceMergesQuickly) {
  // 2^17 "a"s: a linked-list merge is O(n log n); a rescan per merge would take minutes.
  Vocab vocab{{"a", 0}};
  Merges merges;
  std::string token = "a";
  for (int level = 1; level <= 17; ++level) {
    merges.emplace_back(token, token);
    token += token;
    vocab[token] = level;
  }
  auto model = BpeModel::Create(std::move(vocab), merges, {}, "t");
  ASSERT_TRUE(model.ok());
  EXPECT_THAT(Encode(**model, std::string(1 << 17, 'a')), ElementsAre(17));
  EXPECT_THAT(Encode(**model, std::string((1 << 17) + 3, 'a')), ElementsAre(17, 1, 0));
}

}  // namespace
}  // namespace inflight::tokenizer
