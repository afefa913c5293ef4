// The CPU runner's step semantics: chunking and batching do not change logits, logits selection,
// and bad steps fail with clear errors without breaking the runner.
#include <gtest/gtest.h>

#include <random>

#include "unit/model_cpu/test_engine.h"

namespace inflight::model {
namespace {

using testing::NormalisedError;
using testing::TestEngine;

constexpr std::int32_t kTokensPerBlock = 4;
constexpr std::int64_t kMaxKvTokens = 66;  // 16 blocks of 4 (the 2 extra tokens round down)

RandomCheckpointOptions Options(const std::string& arch) {
  RandomCheckpointOptions o;
  o.arch = arch;
  o.hidden_size = 64;
  o.num_layers = 2;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.intermediate_size = 96;
  o.vocab_size = 300;
  o.max_position_embeddings = 64;
  o.init_std = 0.2;  // large enough that attention and MLP move the logits visibly
  o.seed = 7;
  if (arch == "llama") {
    o.rope.type = RopeType::kLlama3;
    o.rope.factor = 8.0;
    o.rope.original_max_position_embeddings = 32;
  }
  if (arch == "mistral") {
    o.hidden_size = 48;  // head_dim 12
    o.num_kv_heads = 1;  // MQA
  }
  if (arch == "gpt2") {
    o.num_kv_heads = 4;
    o.intermediate_size = 256;
  }
  return o;
}

std::vector<TokenIdType> RandomTokens(std::size_t n, std::uint64_t seed, std::int32_t vocab = 300) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<TokenIdType> d(0, vocab - 1);
  std::vector<TokenIdType> t(n);
  for (auto& x : t) x = d(rng);
  return t;
}

SequenceStep MakeStep(std::vector<TokenIdType> tokens, std::int32_t num_cached,
                      std::vector<std::int32_t> table, SequenceStep::Logits logits) {
  SequenceStep s;
  s.tokens = std::move(tokens);
  s.num_cached = num_cached;
  s.block_table = std::move(table);
  s.logits = logits;
  return s;
}

// Runs `prompt` through a fresh runner in chunks of the given sizes; returns every position's
// logits.
std::vector<float> RunInChunks(const TestEngine& engine, const std::vector<TokenIdType>& prompt,
                               const std::vector<std::int32_t>& table,
                               const std::vector<std::size_t>& chunks) {
  auto runner = engine.Runner(kMaxKvTokens);
  std::vector<float> all;
  std::size_t done = 0;
  for (std::size_t n : chunks) {
    StepInput in;
    in.sequences.push_back(MakeStep({prompt.begin() + done, prompt.begin() + done + n},
                                    static_cast<std::int32_t>(done), table,
                                    SequenceStep::Logits::kAll));
    auto out = runner->Step(in);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) return {};
    EXPECT_EQ(out->logits.size(), n * 300);
    all.insert(all.end(), out->logits.begin(), out->logits.end());
    done += n;
  }
  EXPECT_EQ(done, prompt.size());
  return all;
}

class RunnerArchTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string error;
    engine_ = TestEngine::Make(Options(GetParam()), DType::kFloat32, kTokensPerBlock, &error);
    ASSERT_NE(engine_, nullptr) << error;
  }
  std::unique_ptr<TestEngine> engine_;
};

TEST_P(RunnerArchTest, ChunkingDoesNotChangeLogits) {
  const auto prompt = RandomTokens(23, 1);
  const std::vector<std::int32_t> table = {9, 3, 14, 0, 7, 11, 5};  // non-monotonic; 6 are needed
  const auto whole = RunInChunks(*engine_, prompt, table, {23});
  ASSERT_EQ(whole.size(), 23u * 300);
  const auto chunked = RunInChunks(*engine_, prompt, table, {5, 8, 1, 9});
  const auto by_token = RunInChunks(*engine_, prompt, table, std::vector<std::size_t>(23, 1));
  ASSERT_EQ(chunked.size(), whole.size());
  ASSERT_EQ(by_token.size(), whole.size());
  EXPECT_LE(NormalisedError(chunked.data(), whole.data(), whole.size()), 1e-5);
  EXPECT_LE(NormalisedError(by_token.data(), whole.data(), whole.size()), 1e-5);
  // Logits differ across positions (the test would be vacuous on a constant model).
  EXPECT_GT(NormalisedError(whole.data(), whole.data() + 22 * 300, 300), 1e-2);
}

TEST_P(RunnerArchTest, BatchingDoesNotChangeLogits) {
  const auto a = RandomTokens(11, 2), b = RandomTokens(7, 3);
  const std::vector<std::int32_t> ta = {6, 2, 13, 4}, tb = {1, 15, 8};
  auto alone = [&](const std::vector<TokenIdType>& p, const std::vector<std::int32_t>& t) {
    auto runner = engine_->Runner(kMaxKvTokens);
    StepInput in;
    in.sequences.push_back(MakeStep(p, 0, t, SequenceStep::Logits::kAll));
    auto out = runner->Step(in);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? out->logits : std::vector<float>{};
  };
  const auto la = alone(a, ta), lb = alone(b, tb);
  ASSERT_FALSE(la.empty());
  ASSERT_FALSE(lb.empty());

  auto runner = engine_->Runner(kMaxKvTokens);
  StepInput in;
  in.sequences.push_back(MakeStep(a, 0, ta, SequenceStep::Logits::kAll));
  in.sequences.push_back(MakeStep(b, 0, tb, SequenceStep::Logits::kAll));
  auto out = runner->Step(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->row_begin, (std::vector<std::int32_t>{0, 11}));
  ASSERT_EQ(out->logits.size(), (11u + 7u) * 300);
  EXPECT_LE(NormalisedError(out->logits.data(), la.data(), la.size()), 1e-5);
  EXPECT_LE(NormalisedError(out->logits.data() + 11 * 300, lb.data(), lb.size()), 1e-5);

  // A mixed step: b decodes one token while a's prompt is re-sent as a fresh sequence in new
  // blocks.
  const TokenIdType next = 42;
  StepInput mixed;
  mixed.sequences.push_back(MakeStep(a, 0, {0, 3, 5}, SequenceStep::Logits::kLast));
  mixed.sequences.push_back(MakeStep({next}, 7, tb, SequenceStep::Logits::kLast));
  auto mixed_out = runner->Step(mixed);
  ASSERT_TRUE(mixed_out.ok()) << mixed_out.status().ToString();
  ASSERT_EQ(mixed_out->row_begin, (std::vector<std::int32_t>{0, 1}));
  EXPECT_LE(NormalisedError(mixed_out->logits.data(), la.data() + 10 * 300, 300), 1e-5);
  // b + next alone, by its whole prompt in one step.
  auto b_next = b;
  b_next.push_back(next);
  const auto lbn = alone(b_next, tb);
  EXPECT_LE(NormalisedError(mixed_out->logits.data() + 300, lbn.data() + 7 * 300, 300), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Archs, RunnerArchTest,
                         ::testing::Values("llama", "mistral", "qwen2", "gpt2"),
                         [](const auto& info) { return info.param; });

class RunnerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    engine_ = TestEngine::Make(Options("gpt2"), DType::kFloat32, kTokensPerBlock, &error).release();
    ASSERT_NE(engine_, nullptr) << error;
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  static TestEngine* engine_;
};
TestEngine* RunnerTest::engine_ = nullptr;

TEST_F(RunnerTest, ReportsCapacityAndDevice) {
  auto runner = engine_->Runner(kMaxKvTokens);
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->num_kv_blocks(), 16);
  EXPECT_STREQ(runner->device_name(), "cpu");
  EXPECT_EQ(runner->config().vocab_size, 300);
  // At least the KV pools: 2 layers x (K, V) x 16 blocks x 4 heads x 4 tokens x 16 dims x 4 bytes.
  EXPECT_GE(runner->memory_bytes(), 2 * 2 * 16 * 4 * 4 * 16 * 4);
}

TEST_F(RunnerTest, LogitsSelection) {
  auto runner = engine_->Runner(kMaxKvTokens);
  StepInput in;
  in.sequences.push_back(MakeStep(RandomTokens(5, 4), 0, {0, 1}, SequenceStep::Logits::kNone));
  in.sequences.push_back(MakeStep(RandomTokens(3, 5), 0, {2}, SequenceStep::Logits::kAll));
  in.sequences.push_back(MakeStep(RandomTokens(6, 6), 0, {3, 4}, SequenceStep::Logits::kLast));
  auto out = runner->Step(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->vocab_size, 300);
  EXPECT_EQ(out->row_begin, (std::vector<std::int32_t>{0, 0, 3}));
  EXPECT_EQ(out->logits.size(), 4u * 300);

  StepInput empty;
  auto none = runner->Step(empty);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->logits.empty());
}

TEST_F(RunnerTest, BadStepsFailWithClearErrorsAndLeaveTheRunnerUsable) {
  auto runner = engine_->Runner(kMaxKvTokens);
  const auto prompt = RandomTokens(9, 8);
  struct Bad {
    SequenceStep step;
    std::string expect;
  };
  std::vector<Bad> bad = {
      {MakeStep({}, 0, {0}, SequenceStep::Logits::kLast), "tokens is empty"},
      {MakeStep({1, 300}, 0, {0}, SequenceStep::Logits::kLast),
       "token 1 is id 300, must be in [0, 300)"},
      {MakeStep({-1}, 0, {0}, SequenceStep::Logits::kLast), "is id -1"},
      {MakeStep(prompt, 0, {0, 1}, SequenceStep::Logits::kLast),
       "block_table has 2 blocks but positions [0, 9) need 3"},
      {MakeStep({5}, 8, {0, 1}, SequenceStep::Logits::kLast), "need 3"},
      {MakeStep(prompt, 0, {0, 16, 2}, SequenceStep::Logits::kLast),
       "block_table[1] is 16, must be in [0, 16)"},
      {MakeStep(prompt, 0, {0, 1, -3}, SequenceStep::Logits::kLast), "block_table[2] is -3"},
      // The CPU runner has no lookahead (supports_lookahead false).
      {[] {
         SequenceStep s = MakeStep({-1}, 8, {0, 1, 2}, SequenceStep::Logits::kLast);
         s.previous_step_row = 0;
         return s;
       }(),
       "previous_step_row is 0, but this runner has no lookahead"},
      {[] {
         SequenceStep s = MakeStep({5}, 8, {0, 1, 2}, SequenceStep::Logits::kLast);
         s.previous_step_row = -2;
         return s;
       }(),
       "previous_step_row is -2, must be -1"},
      {MakeStep({5}, -1, {0}, SequenceStep::Logits::kLast), "num_cached is -1"},
      // gpt2's learned position table has 64 rows.
      {MakeStep({5}, 64, std::vector<std::int32_t>(17, 0), SequenceStep::Logits::kLast),
       "last position 64 is past the learned position table"},
  };
  StepInput good;
  good.sequences.push_back(MakeStep(prompt, 0, {5, 6, 7}, SequenceStep::Logits::kLast));
  auto before = runner->Step(good);
  ASSERT_TRUE(before.ok());
  for (const auto& b : bad) {
    StepInput in;
    // The bad sequence comes second: the good one before it must not be run (or half-written)
    // either.
    in.sequences.push_back(MakeStep(prompt, 0, {8, 9, 10}, SequenceStep::Logits::kLast));
    in.sequences.push_back(b.step);
    auto out = runner->Step(in);
    ASSERT_FALSE(out.ok()) << b.expect;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(b.expect), std::string::npos) << out.status().message();
    EXPECT_NE(out.status().message().find("sequence 1"), std::string::npos)
        << out.status().message();
  }
  auto after = runner->Step(good);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->logits, before->logits);
}

TEST_F(RunnerTest, CreateErrors) {
  RunnerOptions o;
  o.max_kv_tokens = 3;  // less than one block of 4
  auto r = CreateCpuModelRunner(engine_->engine_dir(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max_kv_tokens 3"), std::string::npos)
      << r.status().message();

  o.max_kv_tokens = 64;
  auto missing = CreateCpuModelRunner(engine_->engine_dir() + "/nope", o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos)
      << missing.status().message();
}

// Half-precision engines run the same forward on rounded weights: logits stay close to fp32's.
TEST(RunnerDTypeTest, HalfPrecisionWeightsTrackFloat32) {
  const auto prompt = RandomTokens(12, 9);
  std::vector<float> ref;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    std::string error;
    auto engine = TestEngine::Make(Options("llama"), dtype, kTokensPerBlock, &error);
    ASSERT_NE(engine, nullptr) << error;
    auto runner = engine->Runner(kMaxKvTokens, 1);
    StepInput in;
    in.sequences.push_back(MakeStep(prompt, 0, {2, 0, 1}, SequenceStep::Logits::kAll));
    auto out = runner->Step(in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    if (dtype == DType::kFloat32) {
      ref = out->logits;
      continue;
    }
    const double err = NormalisedError(out->logits.data(), ref.data(), ref.size());
    EXPECT_LE(err, dtype == DType::kFloat16 ? 5e-3 : 4e-2) << DTypeName(dtype);
    EXPECT_GT(err, 0.0) << DTypeName(dtype)
                        << " gave bit-identical logits: were the weights converted?";
  }
}

}  // namespace
}  // namespace inflight::model
