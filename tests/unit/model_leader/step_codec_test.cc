// The leader's step messages (model/step_codec.h): every field a follower's Step reads comes back
// as the leader sent it, embedding biases travel once per object, and damaged messages are errors.
#include "model/step_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace inflight::model {
namespace {

std::vector<std::int32_t> RandomInts(std::mt19937& rng, std::size_t n, std::int32_t hi) {
  std::uniform_int_distribution<std::int32_t> pick(0, hi);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = pick(rng);
  return v;
}

DeviceSampling RandomSampling(std::mt19937& rng, std::shared_ptr<const std::vector<float>> bias) {
  std::uniform_real_distribution<float> real(0.0f, 2.0f);
  DeviceSampling d;
  d.greedy = rng() % 2 == 0;
  d.temperature = real(rng);
  d.top_k = static_cast<std::int32_t>(rng() % 50);
  d.top_p = real(rng) / 2;
  d.seed = (static_cast<std::uint64_t>(rng()) << 32) | rng();
  d.draw_index = rng();
  d.repetition_penalty = real(rng);
  d.presence_penalty = real(rng) - 1;
  d.frequency_penalty = real(rng) - 1;
  d.penalty_tokens = RandomInts(rng, rng() % 9, 1000);
  d.penalty_counts = RandomInts(rng, d.penalty_tokens.size(), 5);
  d.banned_tokens = RandomInts(rng, rng() % 4, 1000);
  d.embedding_bias = std::move(bias);
  d.normalize_log_probs = rng() % 2 == 0;
  return d;
}

void ExpectSameSampling(const DeviceSampling& a, const DeviceSampling& b) {
  EXPECT_EQ(a.greedy, b.greedy);
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.top_p, b.top_p);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.draw_index, b.draw_index);
  EXPECT_EQ(a.repetition_penalty, b.repetition_penalty);
  EXPECT_EQ(a.presence_penalty, b.presence_penalty);
  EXPECT_EQ(a.frequency_penalty, b.frequency_penalty);
  EXPECT_EQ(a.penalty_tokens, b.penalty_tokens);
  EXPECT_EQ(a.penalty_counts, b.penalty_counts);
  EXPECT_EQ(a.banned_tokens, b.banned_tokens);
  ASSERT_EQ(a.embedding_bias == nullptr, b.embedding_bias == nullptr);
  if (a.embedding_bias) {
    EXPECT_EQ(*a.embedding_bias, *b.embedding_bias);
  }
  EXPECT_EQ(a.normalize_log_probs, b.normalize_log_probs);
}

void ExpectSameStep(const StepInput& a, const StepInput& b) {
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (std::size_t i = 0; i < a.sequences.size(); ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i));
    const SequenceStep& x = a.sequences[i];
    const SequenceStep& y = b.sequences[i];
    EXPECT_EQ(x.seq_id, y.seq_id);
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_EQ(x.num_cached, y.num_cached);
    EXPECT_EQ(x.block_table, y.block_table);
    EXPECT_EQ(x.logits, y.logits);
    ASSERT_EQ(x.device_sampling.has_value(), y.device_sampling.has_value());
    if (x.device_sampling) {
      ExpectSameSampling(*x.device_sampling, *y.device_sampling);
    }
  }
}

StepInput RandomStep(std::mt19937& rng, std::size_t num_sequences,
                     const std::vector<std::shared_ptr<const std::vector<float>>>& biases) {
  StepInput in;
  for (std::size_t i = 0; i < num_sequences; ++i) {
    SequenceStep s;
    s.seq_id = static_cast<std::int64_t>(rng()) * 3 - 7;
    s.tokens = RandomInts(rng, 1 + rng() % 300, 50000);  // odd lengths, prompt chunks and decodes
    s.num_cached = static_cast<std::int32_t>(rng() % 1000);
    s.block_table = RandomInts(rng, 1 + rng() % 19, 4096);
    s.logits = static_cast<SequenceStep::Logits>(rng() % 3);
    if (rng() % 2 == 0) {
      s.device_sampling =
          RandomSampling(rng, biases.empty() ? nullptr : biases[rng() % biases.size()]);
    }
    in.sequences.push_back(std::move(s));
  }
  return in;
}

TEST(StepCodecTest, RandomStepsRoundTripExactly) {
  std::mt19937 rng(1234);
  auto bias = [&](std::size_t n) {
    std::normal_distribution<float> normal;
    auto v = std::make_shared<std::vector<float>>(n);
    for (float& x : *v) x = normal(rng);
    (*v)[n / 2] = -INFINITY;  // a banned id travels as a float, not as a special case
    return std::shared_ptr<const std::vector<float>>(v);
  };
  std::vector<std::shared_ptr<const std::vector<float>>> biases = {nullptr, bias(1025), bias(99)};
  EmbeddingBiasSender sender;
  EmbeddingBiasReceiver receiver;
  for (std::size_t n : {0, 1, 19, 99}) {
    SCOPED_TRACE("sequences " + std::to_string(n));
    StepInput in = RandomStep(rng, n, biases);
    auto out = DecodeLeaderMessage(EncodeStep(in, sender), receiver);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->kind, LeaderMessageKind::kStep);
    ExpectSameStep(in, out->step);
  }
}

TEST(StepCodecTest, StopDecodesAsStop) {
  EmbeddingBiasReceiver receiver;
  auto out = DecodeLeaderMessage(EncodeStop(), receiver);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->kind, LeaderMessageKind::kStop);
}

StepInput OneSequenceWithBias(std::shared_ptr<const std::vector<float>> bias) {
  StepInput in;
  in.sequences.emplace_back();
  in.sequences[0].tokens = {5};
  in.sequences[0].block_table = {0};
  in.sequences[0].device_sampling.emplace().embedding_bias = std::move(bias);
  return in;
}

TEST(StepCodecTest, EmbeddingBiasTravelsOnceAndStaysOneObjectOnTheFollower) {
  auto bias = std::make_shared<const std::vector<float>>(5000, 0.25f);
  EmbeddingBiasSender sender;
  EmbeddingBiasReceiver receiver;
  const std::string first = EncodeStep(OneSequenceWithBias(bias), sender);
  const std::string second = EncodeStep(OneSequenceWithBias(bias), sender);
  // The values (20000 bytes) go in the first message only.
  EXPECT_GT(first.size(), 20000u);
  EXPECT_LT(second.size(), 200u);
  auto a = DecodeLeaderMessage(first, receiver);
  auto b = DecodeLeaderMessage(second, receiver);
  ASSERT_TRUE(a.ok() && b.ok());
  const auto& bias_a = a->step.sequences[0].device_sampling->embedding_bias;
  const auto& bias_b = b->step.sequences[0].device_sampling->embedding_bias;
  EXPECT_EQ(bias_a.get(), bias_b.get()) << "the follower's runner caches the bias per object";
  EXPECT_EQ(*bias_a, *bias);
}

TEST(StepCodecTest, BiasOfAFinishedRequestIsRetiredOnBothSides) {
  EmbeddingBiasSender sender;
  EmbeddingBiasReceiver receiver;
  auto bias = std::make_shared<const std::vector<float>>(10, 1.0f);
  ASSERT_TRUE(DecodeLeaderMessage(EncodeStep(OneSequenceWithBias(bias), sender), receiver).ok());
  EXPECT_EQ(receiver.objects.size(), 1u);
  bias.reset();  // the request ended
  // A new object may take the old one's address: it must travel as new, with its own values.
  auto other = std::make_shared<const std::vector<float>>(10, 2.0f);
  auto out = DecodeLeaderMessage(EncodeStep(OneSequenceWithBias(other), sender), receiver);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out->step.sequences[0].device_sampling->embedding_bias, *other);
  EXPECT_EQ(sender.size(), 1u);
  EXPECT_EQ(receiver.objects.size(), 1u);
}

TEST(StepCodecTest, DamagedMessagesAreErrors) {
  std::mt19937 rng(7);
  auto bias = std::make_shared<const std::vector<float>>(64, 0.5f);
  EmbeddingBiasSender sender;
  const std::string good = EncodeStep(RandomStep(rng, 5, {bias}), sender);
  for (std::size_t cut :
       {std::size_t{0}, std::size_t{1}, std::size_t{9}, good.size() / 2, good.size() - 1}) {
    EmbeddingBiasReceiver receiver;
    auto out = DecodeLeaderMessage(std::string_view(good).substr(0, cut), receiver);
    EXPECT_FALSE(out.ok()) << "a message cut at byte " << cut << " of " << good.size();
  }
  EmbeddingBiasReceiver receiver;
  EXPECT_FALSE(DecodeLeaderMessage(good + "x", receiver).ok());
  std::string wrong_kind = good;
  wrong_kind[0] = 9;
  auto out = DecodeLeaderMessage(wrong_kind, receiver);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("kind 9"), std::string::npos) << out.status().message();
}

TEST(StepCodecTest, UnknownBiasNumberIsAnError) {
  auto bias = std::make_shared<const std::vector<float>>(8, 1.0f);
  EmbeddingBiasSender sender;
  (void)EncodeStep(OneSequenceWithBias(bias), sender);  // the receiver never gets this one
  EmbeddingBiasReceiver receiver;
  auto out = DecodeLeaderMessage(EncodeStep(OneSequenceWithBias(bias), sender), receiver);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("never sent"), std::string::npos) << out.status().message();
}

}  // namespace
}  // namespace inflight::model

namespace inflight::model {
namespace {

TEST(StepCodecTest, StepOutputRoundTripsExactly) {
  StepOutput out;
  out.vocab_size = 1025;
  out.logits.resize(3 * 1025);
  for (std::size_t i = 0; i < out.logits.size(); ++i) out.logits[i] = std::sin(0.37f * i) * 40;
  out.logits[7] = -INFINITY;
  out.row_begin = {0, 1, 1, 3};
  out.sampled_tokens = {-1, 17, StepOutput::kSampledAllBanned};
  out.sampled_log_probs = {NAN, -0.25f, NAN};
  out.device_wait_ms = 1.5;
  out.device_ms = 2.25;
  auto got = DecodeStepOutput(EncodeStepOutput(out));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->logits.size(), out.logits.size());
  EXPECT_EQ(std::memcmp(got->logits.data(), out.logits.data(), out.logits.size() * sizeof(float)),
            0);
  EXPECT_EQ(got->row_begin, out.row_begin);
  EXPECT_EQ(got->vocab_size, out.vocab_size);
  EXPECT_EQ(got->sampled_tokens, out.sampled_tokens);
  ASSERT_EQ(got->sampled_log_probs.size(), 3u);
  EXPECT_TRUE(std::isnan(got->sampled_log_probs[0]));
  EXPECT_EQ(got->sampled_log_probs[1], -0.25f);
  EXPECT_EQ(got->device_wait_ms, 1.5);
  EXPECT_EQ(got->device_ms, 2.25);
  const std::string bytes = EncodeStepOutput(out);
  EXPECT_FALSE(DecodeStepOutput(std::string_view(bytes).substr(0, bytes.size() - 1)).ok());
}

}  // namespace
}  // namespace inflight::model
