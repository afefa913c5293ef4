// The executor end to end on the CPU runner with sliding-window attention: a random Mistral
// checkpoint with sliding_window 16 through the converter, and a full-attention engine limited at
// run time by max_attention_window_size and sink_token_length. Greedy outputs of prompts longer
// than the window must equal NaiveForward's, which recomputes every step from scratch (no cache, no
// paging) with the window applied key by key, alone, batched and in chunks.
#include <gtest/gtest.h>

#include "inflight/executor.h"
#include "model/engine_config.h"
#include "model/model_shard.h"
#include "model/safetensors.h"
#include "unit/executor/run_requests.h"
#include "unit/executor/test_engine.h"
#include "unit/model_cpu/naive_forward.h"

namespace inflight {
namespace {

using Window = kernels::cpu::AttentionWindow;

// A random Mistral checkpoint with sliding_window 16 (Mistral-7B-v0.1's field, smaller), through
// the converter: every layer of the engine attends the last 16 keys.
std::string WindowedEngine() {
  static const std::string dir = [] {
    testing::TinyEngineOptions o;
    o.arch = "mistral";
    o.seed = 23;
    o.sliding_window = 16;
    return testing::TinyEngine(o, "window_mistral");
  }();
  return dir;
}

std::string FullEngine() {
  static const std::string dir = testing::TinyEngine(testing::TinyEngineOptions(), "window_full");
  return dir;
}

VecTokens Prompt(std::uint32_t seed, std::size_t len) {
  return testing::RandomPrompt(seed, len, testing::TinyEngineOptions().vocab_size);
}

using testing::Greedy;

// Runs requests to completion; returns each one's output tokens, in request order.
std::vector<VecTokens> RunAll(Executor& ex, const std::vector<Request>& reqs) {
  std::vector<VecTokens> out;
  for (const Response& r : testing::RunAll(ex, reqs)) {
    EXPECT_TRUE(r.isFinal() && !r.hasError()) << (r.hasError() ? r.error->ToString() : "no final");
    out.push_back(r.isFinal() && !r.hasError() ? r.result.output_token_ids.at(0) : VecTokens{});
  }
  return out;
}

// NaiveForward's greedy continuation on the engine's weights with `windows` per layer.
VecTokens NaiveGreedy(const std::string& engine_dir, const std::vector<Window>& windows,
                      const VecTokens& prompt, int n) {
  auto config = model::LoadEngineConfig(engine_dir);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto file = model::SafetensorsFile::Open(engine_dir + "/rank0.safetensors");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  auto shard = model::MakeModelShard(*config, 0, 1, 0, 1);
  EXPECT_TRUE(shard.ok()) << shard.status().ToString();
  auto weights = model::BindTransformerWeights(*config, *shard, **file);
  EXPECT_TRUE(weights.ok()) << weights.status().ToString();
  return model::testing::NaiveForward(*config, *weights, windows).Greedy(prompt, n);
}

std::unique_ptr<Executor> Make(const std::string& engine, ExecutorConfig cfg = {}) {
  cfg.device = DeviceKind::kCpu;
  auto ex = Executor::Create(engine, cfg);
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  return ex.ok() ? std::move(ex).value() : nullptr;
}

const std::vector<VecTokens>& Prompts() {
  static const std::vector<VecTokens> prompts = {Prompt(1, 17), Prompt(2, 40), Prompt(3, 77),
                                                 Prompt(4, 5)};
  return prompts;
}
constexpr int kNewTokens = 24;

TEST(ExecutorWindow, SlidingWindowGreedyMatchesNaiveRecompute) {
  ASSERT_EQ(WindowedEngine().rfind("error", 0), std::string::npos) << WindowedEngine();
  auto config = model::LoadEngineConfig(WindowedEngine());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->attention_windows, (std::vector<std::int64_t>{16, 16}));
  const std::vector<Window> windows = {{16, 0}, {16, 0}};
  std::vector<Request> reqs;
  std::vector<VecTokens> expected;
  for (const VecTokens& p : Prompts()) {
    reqs.push_back(Greedy(p, kNewTokens));
    expected.push_back(NaiveGreedy(WindowedEngine(), windows, p, kNewTokens));
  }
  // The window changes what the model says (else the test could not fail).
  EXPECT_NE(NaiveGreedy(WindowedEngine(), {}, Prompts()[2], kNewTokens), expected[2]);
  // One at a time, all at once, and in 8-token chunks that share steps with decodes.
  {
    auto ex = Make(WindowedEngine());
    ASSERT_TRUE(ex);
    for (std::size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(RunAll(*ex, {reqs[i]})[0], expected[i]) << "alone, prompt " << i;
    const auto batched = RunAll(*ex, reqs);
    for (std::size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(batched[i], expected[i]) << "batched, prompt " << i;
  }
  {
    ExecutorConfig cfg;
    cfg.max_num_tokens = 8;
    cfg.scheduler_config.enable_chunked_context = true;
    auto ex = Make(WindowedEngine(), cfg);
    ASSERT_TRUE(ex);
    const auto chunked = RunAll(*ex, reqs);
    for (std::size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(chunked[i], expected[i]) << "chunked, prompt " << i;
  }
}

TEST(ExecutorWindow, MaxAttentionWindowSizeAndSinksAreHonoured) {
  ASSERT_EQ(FullEngine().rfind("error", 0), std::string::npos) << FullEngine();
  ExecutorConfig cfg;
  cfg.kv_cache_config.max_attention_window = std::vector<SizeType>{12, 30};
  cfg.kv_cache_config.sink_token_length = 3;
  // Layer 0: 12 keys, 3 of them sinks; layer 1: 30 keys, 3 of them sinks.
  const std::vector<Window> windows = {{9, 3}, {27, 3}};
  auto ex = Make(FullEngine(), cfg);
  ASSERT_TRUE(ex);
  std::vector<Request> reqs;
  for (const VecTokens& p : Prompts()) reqs.push_back(Greedy(p, kNewTokens));
  const auto found = RunAll(*ex, reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(found[i], NaiveGreedy(FullEngine(), windows, Prompts()[i], kNewTokens)) << i;
  EXPECT_NE(found[2], NaiveGreedy(FullEngine(), {}, Prompts()[2], kNewTokens))
      << "the limit would have been ignored";
}

TEST(ExecutorWindow, SinksThatFillTheWindowAreRefusedAtLoad) {
  ExecutorConfig cfg;
  cfg.device = DeviceKind::kCpu;
  cfg.kv_cache_config.max_attention_window = std::vector<SizeType>{8};
  cfg.kv_cache_config.sink_token_length = 8;
  auto ex = Executor::Create(FullEngine(), cfg);
  ASSERT_FALSE(ex.ok());
  EXPECT_NE(ex.status().message().find("sink_token_length 8 leaves layer 0 no recent key"),
            std::string::npos)
      << ex.status().ToString();
}

}  // namespace
}  // namespace inflight
