#include "executor/sampling/word_list.h"

#include <gtest/gtest.h>

#include <vector>

namespace inflight::sampling {
namespace {

TEST(WordList, ParsesNvidiaLayout) {
  const std::vector<std::int32_t> flat = {7, 8, 9, 0, 0};
  const std::vector<std::int32_t> offsets = {2, 3, -1, -1, -1};
  Result<std::vector<VecTokens>> r = ParseWordList(flat, offsets, "stop_words_list");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<VecTokens>{{7, 8}, {9}}));
}

TEST(WordList, NoPaddingAndEmptyList) {
  const std::vector<std::int32_t> flat = {1, 2, 3};
  const std::vector<std::int32_t> offsets = {1, 3, -1};
  Result<std::vector<VecTokens>> r = ParseWordList(flat, std::span(offsets).first(2), "x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<VecTokens>{{1}, {2, 3}}));

  const std::vector<std::int32_t> all_padding = {-1, -1};
  Result<std::vector<VecTokens>> empty = ParseWordList(flat, all_padding, "x");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(WordList, DropsEmptyWords) {
  const std::vector<std::int32_t> flat = {5, 6};
  const std::vector<std::int32_t> offsets = {0, 1, 1, 2};
  Result<std::vector<VecTokens>> r = ParseWordList(flat, offsets, "bad_words_list");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<VecTokens>{{5}, {6}}));
}

void ExpectError(const std::vector<std::int32_t>& flat, const std::vector<std::int32_t>& offsets,
                 const std::string& message) {
  Result<std::vector<VecTokens>> r = ParseWordList(flat, offsets, "bad_words_list");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), message);
}

TEST(WordList, Errors) {
  ExpectError({1, 2, 3, 4}, {3, 2, -1, -1},
              "bad_words_list offset 2 at index 1 is smaller than the previous offset 3: offsets "
              "must be non-decreasing");
  ExpectError({1, 2, 3}, {2, 7, -1},
              "bad_words_list offset 7 at index 1 is past the end of the 3 token ids in row 0: "
              "accepted [2, 3]");
  ExpectError(
      {1, 2, 3}, {-2, -1, -1},
      "bad_words_list offset -2 at index 0 is negative: accepted offsets are >= 0, or -1 as "
      "padding");
  ExpectError({1, 2, 3}, {1, -1, 3},
              "bad_words_list offset 3 at index 2 follows the padding -1 at index 1: padding must "
              "come last");
}

}  // namespace
}  // namespace inflight::sampling
