#include "executor/sampling/logits_processors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace inflight::sampling {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Ids whose logit is -inf.
std::vector<TokenIdType> Banned(const std::vector<float>& logits) {
  std::vector<TokenIdType> out;
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (logits[i] == -kInf) out.push_back(static_cast<TokenIdType>(i));
  return out;
}

TEST(LogitsProcessors, EmbeddingBiasAddsPerToken) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const std::vector<float> bias = {0.5f, -1.0f, 0.0f};
  ApplyEmbeddingBias(logits, bias);
  EXPECT_THAT(logits, ElementsAre(FloatEq(1.5f), FloatEq(1.0f), FloatEq(3.0f)));
  ApplyEmbeddingBias(logits, {});  // empty bias: no-op
  EXPECT_THAT(logits, ElementsAre(FloatEq(1.5f), FloatEq(1.0f), FloatEq(3.0f)));
}

TEST(LogitsProcessors, TemperatureDivides) {
  std::vector<float> logits = {2.0f, -4.0f, 0.0f};
  ApplyTemperature(logits, 0.5f);
  EXPECT_THAT(logits, ElementsAre(FloatEq(4.0f), FloatEq(-8.0f), FloatEq(0.0f)));
}

TEST(LogitsProcessors, RepetitionPenaltyDividesPositiveMultipliesNegativeOncePerToken) {
  std::vector<float> logits = {2.0f, -2.0f, 3.0f, 0.0f, 1.0f};
  const VecTokens prompt = {0, 3};
  const VecTokens generated = {1, 1, 99};  // 1 twice: penalised once; 99 is outside the vocab
  ApplyRepetitionPenalty(logits, prompt, generated, 2.0f);
  EXPECT_THAT(logits, ElementsAre(FloatEq(1.0f), FloatEq(-4.0f), FloatEq(3.0f), FloatEq(0.0f),
                                  FloatEq(1.0f)));
}

TEST(LogitsProcessors, RepetitionPenaltyBelowOneEncourages) {
  std::vector<float> logits = {2.0f, -2.0f};
  const VecTokens generated = {0, 1};
  ApplyRepetitionPenalty(logits, {}, generated, 0.5f);
  EXPECT_THAT(logits, ElementsAre(FloatEq(4.0f), FloatEq(-1.0f)));
}

TEST(LogitsProcessors, PresencePenaltyOncePerDistinctGeneratedToken) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  const VecTokens generated = {0, 2, 2};
  ApplyPresencePenalty(logits, generated, 0.5f);
  EXPECT_THAT(logits, ElementsAre(FloatEq(0.5f), FloatEq(1.0f), FloatEq(0.5f), FloatEq(1.0f)));
}

TEST(LogitsProcessors, FrequencyPenaltyScalesWithCount) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  const VecTokens generated = {2, 0, 2, 2};
  ApplyFrequencyPenalty(logits, generated, 0.25f);
  EXPECT_THAT(logits, ElementsAre(FloatEq(0.75f), FloatEq(1.0f), FloatEq(0.25f), FloatEq(1.0f)));
}

TEST(LogitsProcessors, PresenceAndFrequencyIgnoreThePrompt) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f};
  const VecTokens prompt = {0, 0, 1};
  const VecTokens generated = {2};
  SamplingConfig config;
  config.presence_penalty = 0.5f;
  config.frequency_penalty = 0.25f;
  DecodeContext ctx;
  ctx.prompt = prompt;
  ctx.generated = generated;
  ApplyLogitsProcessors(logits, config, ctx);
  EXPECT_THAT(logits, ElementsAre(FloatEq(1.0f), FloatEq(1.0f), FloatEq(0.25f)));
}

TEST(LogitsProcessors, OrderIsBiasTemperatureThenPenaltiesAsTensorRtLlm) {
  // token 0: ((1 + 1) / 2) - 1 = 0. Penalty before temperature would give (1 + 1 - 1) / 2 = 0.5.
  std::vector<float> logits = {1.0f, 2.0f};
  const std::vector<float> bias = {1.0f, 0.0f};
  const VecTokens generated = {0};
  SamplingConfig config;
  config.temperature = 2.0f;
  config.presence_penalty = 1.0f;
  DecodeContext ctx;
  ctx.generated = generated;
  ctx.embedding_bias = bias;
  ApplyLogitsProcessors(logits, config, ctx);
  EXPECT_THAT(logits, ElementsAre(FloatEq(0.0f), FloatEq(1.0f)));
}

TEST(LogitsProcessors, MinTokensBansEndIdUntilReached) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f};
  ApplyMinTokens(logits, /*num_generated=*/1, /*min_tokens=*/2, /*end_id=*/2);
  EXPECT_THAT(Banned(logits), ElementsAre(2));

  std::vector<float> reached = {1.0f, 1.0f, 1.0f};
  ApplyMinTokens(reached, 2, 2, 2);
  EXPECT_THAT(Banned(reached), ElementsAre());

  std::vector<float> no_end_id = {1.0f, 1.0f, 1.0f};
  ApplyMinTokens(no_end_id, 0, 5, std::nullopt);
  EXPECT_THAT(Banned(no_end_id), ElementsAre());
}

TEST(LogitsProcessors, BadWordsBanLastTokenWhenPrefixMatches) {
  const std::vector<VecTokens> bad = {{1, 2, 3}, {4}, {5, 0}};
  const VecTokens prompt = {5, 1};
  {
    std::vector<float> logits(6, 0.0f);
    const VecTokens generated = {1, 2};
    ApplyBadWords(logits, bad, prompt, generated);
    EXPECT_THAT(Banned(logits), ElementsAre(3, 4));
  }
  {
    std::vector<float> logits(6, 0.0f);
    const VecTokens generated = {2, 1};  // prefix 1 2 is not at the end
    ApplyBadWords(logits, bad, prompt, generated);
    EXPECT_THAT(Banned(logits), ElementsAre(4));
  }
  {
    std::vector<float> logits(6, 0.0f);
    const VecTokens generated = {2};  // prompt's 1 + generated 2: prefix spans the boundary
    ApplyBadWords(logits, bad, prompt, generated);
    EXPECT_THAT(Banned(logits), ElementsAre(3, 4));
  }
  {
    std::vector<float> logits(6, 0.0f);
    const VecTokens prompt_ending_in_5 = {1, 5};
    ApplyBadWords(logits, bad, prompt_ending_in_5, {});
    EXPECT_THAT(Banned(logits), ElementsAre(0, 4));
  }
}

TEST(LogitsProcessors, NeutralConfigChangesNothing) {
  std::vector<float> logits = {0.3f, -1.5f, 2.25f};
  const std::vector<float> before = logits;
  const VecTokens prompt = {0, 1};
  const VecTokens generated = {2, 2};
  SamplingConfig config;
  config.temperature = 1.0f;
  config.repetition_penalty = 1.0f;
  config.presence_penalty = 0.0f;
  config.frequency_penalty = 0.0f;
  DecodeContext ctx;
  ctx.prompt = prompt;
  ctx.generated = generated;
  ctx.end_id = 1;
  ApplyLogitsProcessors(logits, config, ctx);
  EXPECT_EQ(logits, before);
}

}  // namespace
}  // namespace inflight::sampling
