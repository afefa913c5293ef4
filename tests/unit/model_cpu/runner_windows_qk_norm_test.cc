// The CPU runner with sliding windows (the engine's, and the runtime's max_attention_window_size
// and sink_token_length) and with Qwen3's q/k norm, against NaiveForward: every position's logits
// of prompts longer than the window, computed in chunks whose first rows need keys from before
// the chunk, and token by token.
#include <gtest/gtest.h>

#include <random>

#include "model/attention_windows.h"
#include "model/model_shard.h"
#include "unit/model_cpu/engine_edit.h"
#include "unit/model_cpu/naive_forward.h"
#include "unit/model_cpu/test_engine.h"

namespace inflight::model {
namespace {

using testing::NaiveForward;
using testing::NormalisedError;
using testing::TestEngine;

constexpr std::int32_t kTokensPerBlock = 4;
constexpr std::int64_t kVocab = 200;

RandomCheckpointOptions Options(const std::string& arch) {
  RandomCheckpointOptions o;
  o.arch = arch;
  o.hidden_size = 64;
  o.num_layers = 3;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.intermediate_size = 96;
  o.vocab_size = kVocab;
  o.max_position_embeddings = 96;
  o.init_std = 0.2;
  o.seed = 21;
  return o;
}

VecTokens RandomTokens(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<TokenIdType> d(0, kVocab - 1);
  VecTokens t(n);
  for (auto& x : t) x = d(rng);
  return t;
}

// Every position's logits of `prompt` from a fresh runner, in chunks of the given sizes.
std::vector<float> RunnerLogits(const std::string& engine_dir, const RunnerOptions& options,
                                const VecTokens& prompt, const std::vector<std::size_t>& chunks) {
  auto runner = CreateCpuModelRunner(engine_dir, options);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  if (!runner.ok()) return {};
  std::vector<std::int32_t> table((prompt.size() + kTokensPerBlock - 1) / kTokensPerBlock);
  for (std::size_t i = 0; i < table.size(); ++i)
    table[i] = static_cast<std::int32_t>((i * 7 + 3) % table.size());  // a permutation
  std::vector<float> all;
  std::size_t done = 0;
  for (std::size_t n : chunks) {
    StepInput in;
    SequenceStep s;
    s.tokens.assign(prompt.begin() + static_cast<std::ptrdiff_t>(done),
                    prompt.begin() + static_cast<std::ptrdiff_t>(done + n));
    s.num_cached = static_cast<std::int32_t>(done);
    s.block_table = table;
    s.logits = SequenceStep::Logits::kAll;
    in.sequences.push_back(s);
    auto out = (*runner)->Step(in);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) return {};
    all.insert(all.end(), out->logits.begin(), out->logits.end());
    done += n;
  }
  return all;
}

// NaiveForward's logits of every prefix of `prompt`, as floats.
std::vector<float> NaiveLogits(const std::string& engine_dir,
                               const std::vector<kernels::cpu::AttentionWindow>& windows,
                               const VecTokens& prompt) {
  auto config = LoadEngineConfig(engine_dir);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto file = SafetensorsFile::Open(engine_dir + "/rank0.safetensors");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  auto shard = MakeModelShard(*config, 0, 1, 0, 1);
  EXPECT_TRUE(shard.ok()) << shard.status().ToString();
  auto weights = BindTransformerWeights(*config, *shard, **file);
  EXPECT_TRUE(weights.ok()) << weights.status().ToString();
  const NaiveForward naive(*config, *weights, windows);
  std::vector<float> all;
  for (std::size_t t = 1; t <= prompt.size(); ++t) {
    const auto logits = naive.LastLogits(VecTokens(prompt.begin(), prompt.begin() + t));
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

class WindowedEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    engine_ =
        TestEngine::Make(Options("mistral"), DType::kFloat32, kTokensPerBlock, &error).release();
    ASSERT_NE(engine_, nullptr) << error;
    // Layer 0 windowed below a block, layer 1 full, layer 2 across blocks (Qwen2-style mixes).
    const Status set = testing::SetAttentionWindows(engine_->engine_dir(), {3, 0, 11});
    ASSERT_TRUE(set.ok()) << set.ToString();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  static TestEngine* engine_;
};
TestEngine* WindowedEngineTest::engine_ = nullptr;

TEST_F(WindowedEngineTest, EngineWindowsMatchTheNaiveForwardInEveryChunking) {
  const VecTokens prompt = RandomTokens(37, 5);
  const std::vector<kernels::cpu::AttentionWindow> windows = {{3, 0}, {0, 0}, {11, 0}};
  const auto expected = NaiveLogits(engine_->engine_dir(), windows, prompt);
  RunnerOptions o;
  o.max_kv_tokens = 64;
  o.num_threads = 2;
  for (const std::vector<std::size_t>& chunks :
       {std::vector<std::size_t>{37}, {5, 9, 1, 22}, std::vector<std::size_t>(37, 1)}) {
    const auto found = RunnerLogits(engine_->engine_dir(), o, prompt, chunks);
    ASSERT_EQ(found.size(), expected.size());
    EXPECT_LE(NormalisedError(found.data(), expected.data(), found.size()), 1e-4)
        << chunks.size() << " chunks";
  }
  // The windows matter: full attention gives other logits past the first window.
  const auto full = NaiveLogits(engine_->engine_dir(), {}, prompt);
  EXPECT_GT(NormalisedError(full.data() + 30 * kVocab, expected.data() + 30 * kVocab, kVocab),
            1e-3);
}

TEST_F(WindowedEngineTest, RuntimeLimitsAndSinksCombineWithTheEngineWindows) {
  RunnerOptions o;
  o.max_kv_tokens = 64;
  o.num_threads = 2;
  o.attention_limits.max_attention_window = {9, 13};  // layers 0, 1, 2: 9, 13, 9
  o.attention_limits.sink_token_length = 2;
  // min(3, 9) = 3 keys: 1 recent + 2 sinks; min(full, 13): 11 + 2; min(11, 9): 7 + 2.
  auto windows =
      ResolveAttentionWindows(*LoadEngineConfig(engine_->engine_dir()), o.attention_limits);
  ASSERT_TRUE(windows.ok()) << windows.status().ToString();
  ASSERT_EQ((*windows)[0].window, 1);
  ASSERT_EQ((*windows)[1].window, 11);
  ASSERT_EQ((*windows)[2].window, 7);
  const VecTokens prompt = RandomTokens(41, 6);
  const auto expected = NaiveLogits(engine_->engine_dir(), *windows, prompt);
  const auto found = RunnerLogits(engine_->engine_dir(), o, prompt, {6, 17, 1, 1, 16});
  ASSERT_EQ(found.size(), expected.size());
  EXPECT_LE(NormalisedError(found.data(), expected.data(), found.size()), 1e-4);
}

TEST_F(WindowedEngineTest, BadLimitsAreRefusedAtLoad) {
  RunnerOptions o;
  o.max_kv_tokens = 64;
  o.attention_limits.max_attention_window = {64};
  o.attention_limits.sink_token_length = 3;  // layer 0's window of 3 keys would hold only sinks
  auto runner = CreateCpuModelRunner(engine_->engine_dir(), o);
  ASSERT_FALSE(runner.ok());
  EXPECT_NE(runner.status().message().find("sink_token_length 3 leaves layer 0 no recent key"),
            std::string::npos)
      << runner.status().ToString();
}

// What the converter writes from real checkpoint fields: Mistral's sliding_window in every layer,
// and Qwen3 (q/k norm) with use_sliding_window from max_window_layers on, beside a full layer.
TEST(CheckpointWindowsTest, ConverterWindowsAndQwen3MatchTheNaiveForward) {
  RandomCheckpointOptions mistral = Options("mistral");
  mistral.sliding_window = 8;
  RandomCheckpointOptions qwen3 = Options("qwen3");
  qwen3.sliding_window = 10;
  qwen3.max_window_layers = 1;
  struct Case {
    RandomCheckpointOptions options;
    std::vector<std::int64_t> windows;  // what the engine's config.json must say
    bool qk_norm;
  };
  for (const Case& c : {Case{mistral, {8, 8, 8}, false}, Case{qwen3, {0, 10, 10}, true}}) {
    SCOPED_TRACE(c.options.arch);
    std::string error;
    auto engine = TestEngine::Make(c.options, DType::kFloat32, kTokensPerBlock, &error);
    ASSERT_NE(engine, nullptr) << error;
    auto config = LoadEngineConfig(engine->engine_dir());
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->attention_windows, c.windows);
    EXPECT_EQ(config->qk_norm, c.qk_norm);
    auto windows = ResolveAttentionWindows(*config, {});
    ASSERT_TRUE(windows.ok()) << windows.status().ToString();
    const VecTokens prompt = RandomTokens(29, 8);
    const auto expected = NaiveLogits(engine->engine_dir(), *windows, prompt);
    RunnerOptions o;
    o.max_kv_tokens = 64;
    o.num_threads = 2;
    const auto found = RunnerLogits(engine->engine_dir(), o, prompt, {9, 1, 19});
    ASSERT_EQ(found.size(), expected.size());
    EXPECT_LE(NormalisedError(found.data(), expected.data(), found.size()), 1e-4);
  }
}

TEST(QkNormEngineTest, QkNormMatchesTheNaiveForward) {
  std::string error;
  auto engine = TestEngine::Make(Options("llama"), DType::kFloat32, kTokensPerBlock, &error);
  ASSERT_NE(engine, nullptr) << error;
  const VecTokens prompt = RandomTokens(19, 7);
  const auto before = NaiveLogits(engine->engine_dir(), {}, prompt);
  const Status added = testing::AddQkNorm(engine->engine_dir(), 99);
  ASSERT_TRUE(added.ok()) << added.ToString();
  const auto expected = NaiveLogits(engine->engine_dir(), {}, prompt);
  RunnerOptions o;
  o.max_kv_tokens = 64;
  o.num_threads = 2;
  const auto found = RunnerLogits(engine->engine_dir(), o, prompt, {7, 1, 11});
  ASSERT_EQ(found.size(), expected.size());
  EXPECT_LE(NormalisedError(found.data(), expected.data(), found.size()), 1e-4);
  // The norm changes the model.
  EXPECT_GT(NormalisedError(before.data(), expected.data(), expected.size()), 1e-2);
}

TEST(QkNormEngineTest, MissingNormWeightsAreNamed) {
  std::string error;
  auto engine = TestEngine::Make(Options("llama"), DType::kFloat32, kTokensPerBlock, &error);
  ASSERT_NE(engine, nullptr) << error;
  auto config = LoadEngineConfig(engine->engine_dir());
  ASSERT_TRUE(config.ok());
  config->qk_norm = true;  // without adding the weights
  ASSERT_TRUE(SaveEngineConfig(*config, engine->engine_dir()).ok());
  RunnerOptions o;
  o.max_kv_tokens = 64;
  auto runner = CreateCpuModelRunner(engine->engine_dir(), o);
  ASSERT_FALSE(runner.ok());
  EXPECT_NE(runner.status().message().find("tensor \"layers.0.q_norm.weight\" is missing"),
            std::string::npos)
      << runner.status().ToString();
}

}  // namespace
}  // namespace inflight::model
