#include "executor/sampling/top_k_top_p.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "executor/sampling/softmax.h"

namespace inflight::sampling {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<TokenIdType> Kept(const std::vector<float>& logits) {
  std::vector<TokenIdType> out;
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (logits[i] != -kInf) out.push_back(static_cast<TokenIdType>(i));
  return out;
}

std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// Sorted by probability: token 1 (0.4), 3 (0.3), 2 (0.2), 0 (0.1); cumulative 0.4, 0.7, 0.9, 1.
const std::vector<double> kProbs = {0.1, 0.4, 0.2, 0.3};

std::vector<TokenIdType> KeptTopK(std::vector<float> logits, SizeType k) {
  ApplyTopKMask(logits, k);
  return Kept(logits);
}

std::vector<TokenIdType> KeptTopP(std::vector<float> logits, float p) {
  ApplyTopPMask(logits, p);
  return Kept(logits);
}

TEST(TopK, KeepsTheKLargest) {
  const std::vector<float> logits = {1.0f, 5.0f, 2.0f, 4.0f, 0.0f};
  EXPECT_THAT(KeptTopK(logits, 1), ElementsAre(1));
  EXPECT_THAT(KeptTopK(logits, 2), ElementsAre(1, 3));
  EXPECT_THAT(KeptTopK(logits, 3), ElementsAre(1, 2, 3));
}

TEST(TopK, TiesGoToTheLowerId) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
  EXPECT_THAT(KeptTopK(logits, 1), ElementsAre(1));
  EXPECT_THAT(KeptTopK(logits, 2), ElementsAre(1, 3));
  EXPECT_THAT(KeptTopK(logits, 4), ElementsAre(1, 2, 3, 4));
}

TEST(TopK, ZeroOrLargerThanVocabKeepsAll) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  EXPECT_THAT(KeptTopK(logits, 0), ElementsAre(0, 1, 2));
  EXPECT_THAT(KeptTopK(logits, 3), ElementsAre(0, 1, 2));
  EXPECT_THAT(KeptTopK(logits, 100), ElementsAre(0, 1, 2));
}

TEST(TopK, AlreadyMaskedTokensAreNotCounted) {
  const std::vector<float> logits = {-kInf, 1.0f, 2.0f, -kInf};
  EXPECT_THAT(KeptTopK(logits, 2), ElementsAre(1, 2));
  EXPECT_THAT(KeptTopK(logits, 1), ElementsAre(2));
}

// Random rows with many ties (logits drawn from 6 values, some -inf) against the definition: sort
// everything by (logit desc, id asc) and keep the first k unmasked.
TEST(TopK, MatchesFullSortOnRandomRowsWithTies) {
  std::mt19937 rng(2024);
  for (int vocab : {1, 2, 19, 99, 989}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> logits(static_cast<std::size_t>(vocab));
      for (float& l : logits) {
        const int v = static_cast<int>(rng() % 6);
        l = v == 0 ? -kInf : static_cast<float>(v) * 0.5f;
      }
      const auto k = static_cast<SizeType>(rng() % static_cast<unsigned>(vocab + 2));
      std::vector<TokenIdType> order(logits.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](TokenIdType a, TokenIdType b) {
        return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
      });
      std::vector<TokenIdType> expected;
      for (TokenIdType t : order) {
        if (static_cast<SizeType>(expected.size()) == k && k > 0) break;
        if (logits[static_cast<std::size_t>(t)] != -kInf) expected.push_back(t);
      }
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(KeptTopK(logits, k), expected)
          << "vocab " << vocab << " k " << k << " trial " << trial;
    }
  }
}

TEST(TopP, KeepsSmallestPrefixReachingP) {
  const std::vector<float> logits = LogitsOf(kProbs);
  EXPECT_THAT(KeptTopP(logits, 0.35f), ElementsAre(1));
  EXPECT_THAT(KeptTopP(logits, 0.5f), ElementsAre(1, 3));
  EXPECT_THAT(KeptTopP(logits, 0.75f), ElementsAre(1, 2, 3));
  EXPECT_THAT(KeptTopP(logits, 0.95f), ElementsAre(0, 1, 2, 3));
}

TEST(TopP, AlwaysKeepsAtLeastOne) {
  EXPECT_THAT(KeptTopP(LogitsOf(kProbs), 1e-6f), ElementsAre(1));
}

TEST(TopP, OneOrOffKeepsAll) {
  const std::vector<float> logits = LogitsOf(kProbs);
  EXPECT_THAT(KeptTopP(logits, 1.0f), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(KeptTopP(logits, 0.0f), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(KeptTopP(logits, -1.0f), ElementsAre(0, 1, 2, 3));
}

TEST(TopP, TiesGoToTheLowerId) {
  const std::vector<float> uniform(4, 0.0f);  // 0.25 each
  EXPECT_THAT(KeptTopP(uniform, 0.1f), ElementsAre(0));
  EXPECT_THAT(KeptTopP(uniform, 0.3f), ElementsAre(0, 1));
  EXPECT_THAT(KeptTopP(uniform, 0.6f), ElementsAre(0, 1, 2));
}

TEST(TopKTopP, TopPRunsWithinRenormalisedTopK) {
  // Top-3 keeps 1, 3, 2 with mass 0.9; renormalised cumulative 0.444, 0.778, 1. p = 0.75 stops at
  // 3. Applied to the unrenormalised probabilities (0.4, 0.7, 0.9) it would also keep token 2.
  std::vector<float> logits = LogitsOf(kProbs);
  ApplyTopKTopPMask(logits, 3, 0.75f);
  EXPECT_THAT(Kept(logits), ElementsAre(1, 3));

  // The kept set renormalises: 0.4 / 0.7 and 0.3 / 0.7.
  std::vector<double> probs(logits.size());
  Softmax(logits, probs);
  EXPECT_THAT(probs,
              ElementsAre(0.0, DoubleNear(0.4 / 0.7, 1e-6), 0.0, DoubleNear(0.3 / 0.7, 1e-6)));
}

TEST(TopKTopP, TopKAloneAndTopPAlone) {
  std::vector<float> k_only = LogitsOf(kProbs);
  ApplyTopKTopPMask(k_only, 2, 0.0f);
  EXPECT_THAT(Kept(k_only), ElementsAre(1, 3));
  std::vector<float> p_only = LogitsOf(kProbs);
  ApplyTopKTopPMask(p_only, 0, 0.8f);
  EXPECT_THAT(Kept(p_only), ElementsAre(1, 2, 3));
}

}  // namespace
}  // namespace inflight::sampling
