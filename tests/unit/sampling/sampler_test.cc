#include "executor/sampling/sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "executor/sampling/philox.h"

namespace inflight::sampling {
namespace {

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(p > 0 ? static_cast<float>(std::log(p)) : -kInf);
  return out;
}

double LogSumExpOf(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += std::exp(x);
  return std::log(s);
}

SampleResult SampleOk(std::vector<float> logits, const SamplingConfig& config, SamplerState& state,
                      bool normalize, const DecodeContext& ctx = {}) {
  Result<SampleResult> r = Sample(logits, config, ctx, state, normalize);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : SampleResult{-1, 0.0f};
}

SamplingConfig SamplingWith(std::optional<SizeType> top_k, std::optional<float> top_p,
                            std::optional<float> temperature = 1.0f) {
  SamplingConfig c;
  c.top_k = top_k;
  c.top_p = top_p;
  c.temperature = temperature;
  return c;
}

// Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors).
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(Philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Philox4x32Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(Philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (Philox4x32Block{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(Philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (Philox4x32Block{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(SamplerState, StreamIsAFunctionOfSeedAndCounter) {
  SamplerState s(42);
  for (std::uint64_t n = 0; n < 100; ++n) {
    const double u = s.NextUniform();
    EXPECT_EQ(u, PhiloxUniform(42, n));
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  EXPECT_EQ(s.num_draws(), 100u);
  EXPECT_EQ(SamplerState::FromConfig(SamplingConfig{}).seed(), 0u);
  SamplingConfig seeded;
  seeded.seed = 7;
  EXPECT_EQ(SamplerState::FromConfig(seeded).seed(), 7u);
}

TEST(Argmax, LowestIdOnTies) {
  const std::vector<float> logits = {1.0f, 3.0f, -kInf, 3.0f};
  EXPECT_EQ(Argmax(logits), 1);
  const std::vector<float> masked_first = {-kInf, -2.0f, -1.0f};
  EXPECT_EQ(Argmax(masked_first), 2);
}

TEST(DrawFromLogits, InverseCdfInIdOrder) {
  const std::vector<float> logits = LogitsOf({0.25, 0.0, 0.5, 0.25});
  EXPECT_EQ(DrawFromLogits(logits, 0.0), 0);
  EXPECT_EQ(DrawFromLogits(logits, 0.24), 0);
  EXPECT_EQ(DrawFromLogits(logits, 0.26), 2);  // token 1 has probability 0: skipped
  EXPECT_EQ(DrawFromLogits(logits, 0.74), 2);
  EXPECT_EQ(DrawFromLogits(logits, 0.76), 3);
  EXPECT_EQ(DrawFromLogits(logits, std::nextafter(1.0, 0.0)), 3);
  const std::vector<float> first_masked = LogitsOf({0.0, 1.0});
  EXPECT_EQ(DrawFromLogits(first_masked, 0.0), 1);
}

TEST(Sample, GreedyIsArgmaxWithRealLogSoftmax) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  const double expected = 3.0 - LogSumExpOf({1, 3, 3, 2});
  for (bool normalize : {true, false}) {
    SamplerState state(0);
    const SampleResult r = SampleOk(logits, SamplingConfig{}, state, normalize);
    EXPECT_EQ(r.token, 1);
    EXPECT_NEAR(r.log_prob, expected, 1e-6);
    EXPECT_LT(r.log_prob, -0.1f);  // not NVIDIA's 0
  }
}

TEST(Sample, GreedyByTopKOneAppliesTemperatureToTheLogProb) {
  SamplingConfig config = SamplingWith(1, std::nullopt, 0.5f);
  ASSERT_TRUE(config.IsGreedy());
  SamplerState state(0);
  const SampleResult r = SampleOk({1.0f, 2.0f, 0.0f}, config, state, true);
  EXPECT_EQ(r.token, 1);
  EXPECT_NEAR(r.log_prob, 4.0 - LogSumExpOf({2, 4, 0}), 1e-6);
}

TEST(Sample, GreedyByZeroTemperatureIgnoresTemperature) {
  SamplingConfig config = SamplingWith(50, 0.9f, 0.0f);
  ASSERT_TRUE(config.IsGreedy());
  SamplerState state(0);
  const SampleResult r = SampleOk({1.0f, 2.0f, 0.0f}, config, state, true);
  EXPECT_EQ(r.token, 1);
  EXPECT_NEAR(r.log_prob, 2.0 - LogSumExpOf({1, 2, 0}), 1e-6);
}

TEST(Sample, SampledLogProbBothNormalizeModes) {
  // Top-2 keeps tokens 1 (0.4) and 3 (0.3). normalize: log(p / 0.7); otherwise log(p).
  const std::vector<double> probs = {0.1, 0.4, 0.2, 0.3};
  const SamplingConfig config = SamplingWith(2, std::nullopt);
  int seen[4] = {0, 0, 0, 0};
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    SamplerState a(seed);
    SamplerState b(seed);
    const SampleResult norm = SampleOk(LogitsOf(probs), config, a, true);
    const SampleResult raw = SampleOk(LogitsOf(probs), config, b, false);
    ASSERT_EQ(norm.token, raw.token);
    ASSERT_TRUE(norm.token == 1 || norm.token == 3) << norm.token;
    const double p = probs[static_cast<std::size_t>(norm.token)];
    EXPECT_NEAR(norm.log_prob, std::log(p / 0.7), 1e-6);
    EXPECT_NEAR(raw.log_prob, std::log(p), 1e-6);
    ++seen[norm.token];
  }
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[3], 0);
}

TEST(Sample, SampledLogProbIncludesTemperatureAndTopP) {
  // Logits {0, 1, 2} at temperature 0.5 become {0, 2, 4}: probs 0.016, 0.117, 0.867. top_p 0.9
  // keeps tokens 2 and 1 (0.867 < 0.9 <= 0.984).
  const SamplingConfig config = SamplingWith(std::nullopt, 0.9f, 0.5f);
  const double lse_all = LogSumExpOf({0, 2, 4});
  const double lse_kept = LogSumExpOf({2, 4});
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    SamplerState a(seed);
    SamplerState b(seed);
    const SampleResult norm = SampleOk({0.0f, 1.0f, 2.0f}, config, a, true);
    const SampleResult raw = SampleOk({0.0f, 1.0f, 2.0f}, config, b, false);
    ASSERT_NE(norm.token, 0);
    const double processed = 2.0 * norm.token;
    EXPECT_NEAR(norm.log_prob, processed - lse_kept, 1e-6);
    EXPECT_NEAR(raw.log_prob, processed - lse_all, 1e-6);
  }
}

// Pearson chi-square of `counts` against `probs`; 4 degrees of freedom for 5 tokens.
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double chi2 = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0.0) continue;
    const double expected = probs[i] * n;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

std::vector<int> Histogram(const std::vector<float>& logits, const SamplingConfig& config,
                           std::uint64_t seed, int n) {
  std::vector<int> counts(logits.size(), 0);
  SamplerState state(seed);
  for (int i = 0; i < n; ++i) {
    const SampleResult r = SampleOk(logits, config, state, true);
    ++counts[static_cast<std::size_t>(r.token)];
  }
  return counts;
}

constexpr int kDraws = 20000;
constexpr double kChi2Df4P001 = 18.47;  // chi-square, 4 degrees of freedom, p = 0.001

TEST(SampleFrequency, MatchesTheDistribution) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.15, 0.25};
  const std::vector<int> counts =
      Histogram(LogitsOf(probs), SamplingWith(std::nullopt, 1.0f), 1234, kDraws);
  EXPECT_LT(ChiSquare(counts, probs, kDraws), kChi2Df4P001);
}

TEST(SampleFrequency, MatchesTheTemperedDistribution) {
  // Temperature 2 takes the square root of the probabilities before renormalising; top_p 1 asks for
  // a sample from all of it (temperature alone is greedy, as in TensorRT-LLM).
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.15, 0.25};
  std::vector<double> tempered;
  double sum = 0.0;
  for (double p : probs) sum += std::sqrt(p);
  for (double p : probs) tempered.push_back(std::sqrt(p) / sum);
  const std::vector<int> counts =
      Histogram(LogitsOf(probs), SamplingWith(std::nullopt, 1.0f, 2.0f), 99, kDraws);
  EXPECT_LT(ChiSquare(counts, tempered, kDraws), kChi2Df4P001);
}

TEST(SampleFrequency, MaskedTokensAreNeverDrawn) {
  // Token 2 has a -inf logit; top-k 3 then masks the two least probable of the rest (0 and 3).
  const std::vector<double> probs = {0.1, 0.3, 0.0, 0.2, 0.4};
  const std::vector<int> counts =
      Histogram(LogitsOf(probs), SamplingWith(3, std::nullopt), 5, kDraws);
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[2], 0);
  const std::vector<double> kept = {0.0, 0.3 / 0.9, 0.0, 0.2 / 0.9, 0.4 / 0.9};
  EXPECT_LT(ChiSquare(counts, kept, kDraws), 13.82);  // 2 degrees of freedom, p = 0.001
}

TEST(SampleFrequency, TopPMaskedTokensAreNeverDrawn) {
  // top_p 0.6: 0.4 + 0.3 >= 0.6 keeps tokens 4 and 1 only.
  const std::vector<double> probs = {0.1, 0.3, 0.0, 0.2, 0.4};
  const std::vector<int> counts =
      Histogram(LogitsOf(probs), SamplingWith(std::nullopt, 0.6f), 6, kDraws);
  EXPECT_EQ(counts[0] + counts[2] + counts[3], 0);
  EXPECT_EQ(counts[1] + counts[4], kDraws);
  EXPECT_NEAR(static_cast<double>(counts[4]) / kDraws, 0.4 / 0.7, 0.015);
}

std::vector<TokenIdType> Generate(std::uint64_t seed, int n) {
  std::vector<float> logits(100, 0.0f);
  SamplerState state(seed);
  std::vector<TokenIdType> out;
  for (int i = 0; i < n; ++i)
    out.push_back(SampleOk(logits, SamplingWith(std::nullopt, 1.0f), state, true).token);
  return out;
}

TEST(SampleSeed, SameSeedSameTokensDifferentSeedDifferent) {
  EXPECT_EQ(Generate(7, 50), Generate(7, 50));
  EXPECT_NE(Generate(7, 50), Generate(8, 50));
  EXPECT_NE(Generate(0, 50), Generate(1, 50));
}

TEST(SampleSeed, IndependentOfInterleavingWithOtherRequests) {
  const std::vector<TokenIdType> alone_a = Generate(1, 20);
  const std::vector<TokenIdType> alone_b = Generate(2, 20);
  SamplerState a(1);
  SamplerState b(2);
  std::vector<float> logits(100, 0.0f);
  std::vector<TokenIdType> mixed_a;
  std::vector<TokenIdType> mixed_b;
  for (int i = 0; i < 20; ++i) {
    mixed_b.push_back(SampleOk(logits, SamplingWith(std::nullopt, 1.0f), b, true).token);
    if (i % 3 != 2)
      mixed_a.push_back(SampleOk(logits, SamplingWith(std::nullopt, 1.0f), a, true).token);
  }
  while (mixed_a.size() < 20)
    mixed_a.push_back(SampleOk(logits, SamplingWith(std::nullopt, 1.0f), a, true).token);
  EXPECT_EQ(mixed_a, alone_a);
  EXPECT_EQ(mixed_b, alone_b);
}

TEST(Sample, AppliesProcessorsBeforeChoosing) {
  // Greedy would pick 1 = end_id, but min_tokens bans it; token 2 is a banned bad word; 3 wins.
  const VecTokens generated = {0};
  const std::vector<VecTokens> bad = {{2}};
  DecodeContext ctx;
  ctx.generated = generated;
  ctx.end_id = 1;
  ctx.bad_words = bad;
  SamplingConfig config;
  config.min_tokens = 2;
  SamplerState state(0);
  std::vector<float> logits = {0.0f, 5.0f, 4.0f, 1.0f};
  Result<SampleResult> r = Sample(logits, config, ctx, state, true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->token, 3);
  EXPECT_NEAR(r->log_prob, 1.0 - LogSumExpOf({0, 1}), 1e-6);
  EXPECT_EQ(logits[1], -kInf);  // the row holds the processed logits afterwards
}

TEST(Sample, ErrorsWhenNothingCanBeSampled) {
  SamplerState state(0);
  const std::vector<VecTokens> bad = {{0}, {1}};
  DecodeContext ctx;
  ctx.bad_words = bad;
  std::vector<float> logits = {1.0f, 2.0f};
  Result<SampleResult> all_banned = Sample(logits, SamplingConfig{}, ctx, state, true);
  ASSERT_FALSE(all_banned.ok());
  EXPECT_EQ(all_banned.status().code(), StatusCode::kInternal);
  EXPECT_EQ(all_banned.status().message(),
            "every token of the vocabulary (2) is banned (bad words, min_tokens or -inf logits): "
            "cannot sample");

  std::vector<float> with_nan = {1.0f, std::nanf(""), 0.0f};
  Result<SampleResult> nan = Sample(with_nan, SamplingConfig{}, {}, state, true);
  ASSERT_FALSE(nan.ok());
  EXPECT_THAT(nan.status().message(), HasSubstr("logit of token 1 is nan"));
}

}  // namespace
}  // namespace inflight::sampling
