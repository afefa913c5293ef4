// The executor's device-sampling inputs (executor/device_sampling_inputs.h): the per-step penalty
// and ban lists must make the device's processors (device_sampling_reference.h, the kernel's rules)
// give exactly the row the host's ApplyLogitsProcessors gives, for every mix of processors.
#include "executor/device_sampling_inputs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "executor/sampling/decode_context.h"
#include "executor/sampling/logits_processors.h"
#include "executor/sampling/sampler.h"
#include "unit/executor/device_sampling_reference.h"

namespace inflight::executor {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::map<TokenIdType, std::int32_t> Counts(const PenaltyTokens& p) {
  std::map<TokenIdType, std::int32_t> m;
  EXPECT_EQ(p.tokens().size(), p.counts().size());
  for (std::size_t i = 0; i < p.tokens().size(); ++i) {
    EXPECT_TRUE(m.emplace(p.tokens()[i], p.counts()[i]).second)
        << "token " << p.tokens()[i] << " listed twice";
  }
  return m;
}

std::map<TokenIdType, std::int32_t> ExpectedCounts(const VecTokens& prompt,
                                                   const VecTokens& generated,
                                                   bool include_prompt) {
  std::map<TokenIdType, std::int32_t> m;
  if (include_prompt)
    for (TokenIdType t : prompt) m.emplace(t, 0);
  for (TokenIdType t : generated) ++m[t];
  return m;
}

TEST(PenaltyTokens, IncrementalUpdatesEqualCountsFromScratch) {
  std::mt19937 rng(7);
  for (bool include_prompt : {false, true}) {
    for (int trial = 0; trial < 20; ++trial) {
      // Few distinct ids, so prompt and generated share tokens and repeat them.
      std::uniform_int_distribution<TokenIdType> tok(0, 12);
      VecTokens prompt(1 + rng() % 10), generated;
      for (auto& t : prompt) t = tok(rng);
      PenaltyTokens p(include_prompt);
      while (generated.size() < 40) {
        const std::size_t add = rng() % 4;  // 0: a step with nothing new (a pause, a retry)
        for (std::size_t i = 0; i < add; ++i) generated.push_back(tok(rng));
        p.Update(prompt, generated);
        ASSERT_EQ(Counts(p), ExpectedCounts(prompt, generated, include_prompt))
            << "include_prompt " << include_prompt << " trial " << trial << " after "
            << generated.size() << " tokens";
      }
    }
  }
}

TEST(PenaltyTokens, AShorterHistoryRebuilds) {
  PenaltyTokens p(true);
  p.Update(VecTokens{1, 2}, VecTokens{3, 3, 4});
  p.Update(VecTokens{1, 2}, VecTokens{5});
  EXPECT_EQ(Counts(p), (std::map<TokenIdType, std::int32_t>{{1, 0}, {2, 0}, {5, 1}}));
}

TEST(BannedTokens, BadWordsAcrossPromptAndGeneratedAndMinTokens) {
  Request r;
  r.input_token_ids = {5, 6, 7};
  r.bad_words = {{9}, {7, 8}, {6, 7, 1, 2}, {7, 1, 3}, {3}, {7, 50}};  // 50: outside vocab 20
  r.end_id = 4;
  r.sampling_config.min_tokens = 2;
  const VecTokens prompt = r.input_token_ids;
  // Step 0: "7" ends the prompt -> 8 banned; min_tokens bans end_id 4; {3} and {9} always.
  EXPECT_EQ(BannedTokens(r, prompt, {}, 20), (VecTokens{3, 4, 8, 9}));
  // After "1": {7, 1, 3} and {6, 7, 1, 2} match across the prompt boundary; {3} twice: once.
  EXPECT_EQ(BannedTokens(r, prompt, VecTokens{1}, 20), (VecTokens{2, 3, 4, 9}));
  // Two tokens generated: min_tokens reached, end_id free again.
  EXPECT_EQ(BannedTokens(r, prompt, VecTokens{1, 1}, 20), (VecTokens{3, 9}));
  r.end_id = 25;  // outside the vocabulary: nothing to ban (as ApplyMinTokens)
  EXPECT_EQ(BannedTokens(r, prompt, {}, 20), (VecTokens{3, 8, 9}));
}

TEST(DeviceSamplingEligible, EverythingButGenerationLogits) {
  Request r;
  EXPECT_TRUE(DeviceSamplingEligible(r));
  r.output_config.return_log_probs = true;
  r.output_config.return_context_logits = true;  // the context step is kAll: host; decode: device
  r.sampling_config.repetition_penalty = 1.5f;
  r.sampling_config.presence_penalty = 0.5f;
  r.sampling_config.frequency_penalty = -0.5f;
  r.sampling_config.min_tokens = 3;
  r.end_id = 1;
  r.bad_words = {{1, 2}};
  r.embedding_bias = std::vector<float>(4, 0.5f);
  EXPECT_TRUE(DeviceSamplingEligible(r));
  r.output_config.return_generation_logits = true;
  EXPECT_FALSE(DeviceSamplingEligible(r));
  r.output_config.return_generation_logits = false;
  r.sampling_config.beam_width = 2;
  EXPECT_FALSE(DeviceSamplingEligible(r));
}

TEST(DeviceSamplingInputs, NextTakesOneDrawAndKeepsOneBiasHandle) {
  Request r;
  r.input_token_ids = {1, 2};
  r.sampling_config.seed = 77;
  r.sampling_config.temperature = 0.5f;
  r.sampling_config.top_k = 3;
  r.sampling_config.top_p = 0.8f;
  r.embedding_bias = std::vector<float>{0.0f, 1.0f, -kInf, 2.0f};
  sampling::SamplerState sampler = sampling::SamplerState::FromConfig(r.sampling_config);
  sampler.NextUniform();  // a draw the host took (say, the first token from a kAll row)
  DeviceSamplingInputs inputs(r);
  const VecTokens generated = {3};
  const model::DeviceSampling a = inputs.Next(r, r.input_token_ids, generated, sampler, 4, false);
  const model::DeviceSampling b = inputs.Next(r, r.input_token_ids, generated, sampler, 4, true);
  EXPECT_EQ(a.seed, 77u);
  EXPECT_EQ(a.draw_index, 1u);
  EXPECT_EQ(b.draw_index, 2u);
  EXPECT_EQ(sampler.num_draws(), 3u);
  EXPECT_FALSE(a.greedy);
  EXPECT_EQ(a.temperature, 0.5f);
  EXPECT_EQ(a.top_k, 3);
  EXPECT_EQ(a.top_p, 0.8f);
  EXPECT_FALSE(a.normalize_log_probs);
  EXPECT_TRUE(b.normalize_log_probs);
  ASSERT_TRUE(a.embedding_bias);
  EXPECT_EQ(a.embedding_bias.get(), b.embedding_bias.get()) << "a new handle every step";
  EXPECT_EQ(*a.embedding_bias, *r.embedding_bias);
  EXPECT_TRUE(a.penalty_tokens.empty()) << "no penalty is on";
  EXPECT_TRUE(a.banned_tokens.empty());
}

std::string Describe(const SamplingConfig& c, const Request& r) {
  return "temperature " + std::to_string(c.temperature.value_or(-1)) + " repetition " +
         std::to_string(c.repetition_penalty.value_or(1)) + " presence " +
         std::to_string(c.presence_penalty.value_or(0)) + " frequency " +
         std::to_string(c.frequency_penalty.value_or(0)) + " min_tokens " +
         std::to_string(c.min_tokens.value_or(0)) + " bad words " +
         std::to_string(r.bad_words.size()) + " bias " + (r.embedding_bias ? "yes" : "no");
}

// Bit-for-bit: the device's stages read only the lists, the host's the whole history.
TEST(DeviceSamplingInputs, ListsReproduceTheHostProcessorsExactly) {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (std::int64_t vocab : {1, 3, 50, 1000}) {
    std::uniform_int_distribution<TokenIdType> tok(0, static_cast<TokenIdType>(vocab - 1));
    for (int trial = 0; trial < 40; ++trial) {
      Request r;
      r.input_token_ids.resize(1 + rng() % 12);
      for (auto& t : r.input_token_ids) t = tok(rng);
      SamplingConfig& c = r.sampling_config;
      if (trial % 3 != 0) c.temperature = trial % 5 == 0 ? 1.0f : 0.2f + 1.5f * unit(rng);
      if (trial % 2 == 0) c.repetition_penalty = trial % 4 == 0 ? 0.7f : 1.6f;  // < 1 and > 1
      if (trial % 5 < 3) c.presence_penalty = trial % 3 == 0 ? -0.4f : 0.9f;
      if (trial % 7 < 4) c.frequency_penalty = trial % 2 == 0 ? 0.35f : -0.2f;
      if (trial % 4 == 1) {
        c.min_tokens = 4;
        r.end_id = tok(rng);
      }
      if (trial % 3 == 1) {
        for (int w = 0; w < 4; ++w) {
          VecTokens word(1 + rng() % 3);
          for (auto& t : word) t = tok(rng);
          r.bad_words.push_back(word);
        }
      }
      if (trial % 4 == 2) {
        r.embedding_bias = std::vector<float>(static_cast<std::size_t>(vocab));
        for (auto& b : *r.embedding_bias) b = rng() % 9 == 0 ? -kInf : 4.0f * unit(rng) - 2.0f;
      }
      sampling::SamplerState sampler(1);
      DeviceSamplingInputs inputs(r);
      VecTokens generated;
      for (int step = 0; step < 8; ++step) {
        std::vector<float> row(static_cast<std::size_t>(vocab));
        for (auto& l : row) l = 12.0f * unit(rng) - 6.0f;
        if (vocab > 2) row[1] = row[2];  // a tie
        std::vector<float> host = row;
        sampling::ApplyLogitsProcessors(host, c, sampling::MakeDecodeContext(r, generated));
        const model::DeviceSampling d =
            inputs.Next(r, r.input_token_ids, generated, sampler, vocab, true);
        std::vector<float> device = row;
        testing::ApplyDeviceProcessors(device, d);
        for (std::size_t i = 0; i < row.size(); ++i) {
          // memcmp: -inf == -inf and the sign of zero both count.
          ASSERT_EQ(std::memcmp(&device[i], &host[i], sizeof(float)), 0)
              << "vocab " << vocab << " trial " << trial << " step " << step << " token " << i
              << ": found " << device[i] << " expected " << host[i] << " (" << Describe(c, r)
              << ")";
        }
        generated.push_back(tok(rng));
      }
    }
  }
}

}  // namespace
}  // namespace inflight::executor
