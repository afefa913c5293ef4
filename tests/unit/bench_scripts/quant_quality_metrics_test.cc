// The figures of inflight-bench-quant-quality (bench/quant_quality_metrics.h) on rows whose values
// are known in closed form.
#include "quant_quality_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace inflight::bench {
namespace {

TEST(QuantQualityMetrics, LogSoftmaxIsExactAndDoesNotOverflow) {
  std::vector<double> out;
  const float row[] = {0.0f, static_cast<float>(std::log(3.0))};
  LogSoftmax(row, 2, &out);
  EXPECT_NEAR(std::exp(out[0]), 0.25, 1e-7);
  EXPECT_NEAR(std::exp(out[1]), 0.75, 1e-7);
  const float big[] = {1000.0f, 0.0f};  // exp(1000) would overflow without the max shift
  LogSoftmax(big, 2, &out);
  EXPECT_DOUBLE_EQ(out[0], 0.0);
  EXPECT_NEAR(out[1], -1000.0, 1e-9);
}

TEST(QuantQualityMetrics, KlDivergenceMatchesItsDefinition) {
  std::vector<double> p, q;
  const float uniform[] = {1.0f, 1.0f};
  const float skewed[] = {0.0f, static_cast<float>(std::log(3.0))};
  LogSoftmax(uniform, 2, &p);
  LogSoftmax(skewed, 2, &q);
  // 0.5 ln(0.5 / 0.25) + 0.5 ln(0.5 / 0.75) = 0.5 ln(4 / 3)
  EXPECT_NEAR(KlDivergence(p, q), 0.5 * std::log(4.0 / 3.0), 1e-7);
  EXPECT_EQ(KlDivergence(q, q), 0.0);
  EXPECT_GT(KlDivergence(q, p), 0.0);
}

TEST(QuantQualityMetrics, KlDivergenceOfImpossibleAndNanRows) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<double> p, q;
  const float both[] = {0.0f, 0.0f};
  const float one[] = {0.0f, -inf};
  LogSoftmax(both, 2, &p);
  LogSoftmax(one, 2, &q);
  EXPECT_TRUE(std::isinf(KlDivergence(p, q)));  // the candidate rules out a possible token
  EXPECT_NEAR(KlDivergence(q, p), std::log(2.0), 1e-12);  // p == 0 terms add nothing
  const float nan[] = {std::numeric_limits<float>::quiet_NaN(), 0.0f};
  LogSoftmax(nan, 2, &q);
  EXPECT_TRUE(std::isnan(KlDivergence(p, q)));
}

TEST(QuantQualityMetrics, ArgMaxTakesTheLowestIdOnTies) {
  const float row[] = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(ArgMax(row, 4), 1);
}

TEST(QuantQualityMetrics, StatsAverageOverPositionsAndPrompts) {
  QualityStats s;
  const float a[] = {2.0f, 0.0f, 0.0f};
  const float b[] = {0.0f, 2.0f, 0.0f};
  s.AddPosition(a, a, 3);  // same argmax, KL 0
  s.AddPosition(a, b, 3);  // different argmax, KL > 0
  EXPECT_EQ(s.positions(), 2);
  EXPECT_DOUBLE_EQ(s.top1_agreement(), 0.5);
  std::vector<double> p, q;
  LogSoftmax(a, 3, &p);
  LogSoftmax(b, 3, &q);
  EXPECT_DOUBLE_EQ(s.max_kl(), KlDivergence(p, q));
  EXPECT_DOUBLE_EQ(s.mean_kl(), KlDivergence(p, q) / 2);
  EXPECT_NEAR(s.mean_reference_entropy(), Entropy(p), 1e-12);

  s.AddContinuation({1, 2, 3, 4}, {1, 2, 9, 4});  // differs at the third of four
  s.AddContinuation({5, 6, 7, 8}, {5, 6, 7, 8});
  EXPECT_EQ(s.continuations(), 2);
  EXPECT_DOUBLE_EQ(s.greedy_prefix_fraction(), (0.5 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(s.identical_continuations(), 0.5);

  const float nan[] = {std::numeric_limits<float>::quiet_NaN(), 0.0f, 0.0f};
  s.AddPosition(a, nan, 3);
  s.AddPosition(a, a, 3);  // a later finite KL must not hide the NaN
  EXPECT_TRUE(std::isnan(s.max_kl()));
  EXPECT_TRUE(std::isnan(s.mean_kl()));
}

}  // namespace
}  // namespace inflight::bench
