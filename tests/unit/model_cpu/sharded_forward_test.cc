// Sharded forward passes against the whole engine's, on CPU: the builder's rank files through
// CpuModelRunner, tensor-parallel (tp 2; tp 4 with fewer kv heads than ranks) and pipeline stages
// (pp 2, tp 2 x pp 2), every rank a thread of one ThreadGroup. The logits of a prompt step and the
// decode steps after it must match tp 1's within fp32 reduction-order rounding, and be the same
// on every rank of the first stage, which answers the step (model_runner.h).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "model/model_shard.h"
#include "unit/model_cpu/test_engine.h"
#include "unit/model_cpu/thread_group_collectives.h"

namespace inflight::model {
namespace {

using testing::NormalisedError;
using testing::TestEngine;
using testing::ThreadGroup;

constexpr std::int32_t kTokensPerBlock = 4;
constexpr std::int64_t kNumBlocks = 8;
constexpr std::int64_t kVocab = 301;  // not a multiple of the ranks: uneven vocabulary slices

RandomCheckpointOptions Options(const std::string& arch) {
  RandomCheckpointOptions o;
  o.arch = arch;
  o.hidden_size = 64;
  o.num_layers = 3;  // two stages get 1 and 2 layers
  o.num_heads = 4;
  o.num_kv_heads = arch == "gpt2" ? 4 : 2;
  o.intermediate_size = arch == "gpt2" ? 256 : 96;
  o.vocab_size = kVocab;
  o.max_position_embeddings = 64;
  o.init_std = 0.2;  // large enough that attention and MLP move the logits visibly
  o.seed = 11;
  return o;
}

// A prompt that spans three KV blocks, then two decode steps, of one sequence; every position's
// logits.
std::vector<StepInput> Steps() {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<TokenIdType> token(0, kVocab - 1);
  const std::vector<std::int32_t> table{6, 1, 4};  // not monotonic
  std::vector<StepInput> steps;
  std::int32_t cached = 0;
  for (const std::size_t n : {std::size_t{9}, std::size_t{1}, std::size_t{1}}) {
    SequenceStep s;
    for (std::size_t i = 0; i < n; ++i) s.tokens.push_back(token(rng));
    s.num_cached = cached;
    s.block_table = table;
    s.logits = SequenceStep::Logits::kAll;
    cached += static_cast<std::int32_t>(n);
    steps.push_back({{s}});
  }
  return steps;
}

using StepLogits = std::vector<std::vector<float>>;

StepLogits RunWithRunner(ModelRunner& runner) {
  StepLogits logits;
  for (const StepInput& in : Steps()) {
    auto out = runner.Step(in);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    logits.push_back(out.ok() ? out->logits : std::vector<float>{});
  }
  return logits;
}

StepLogits Reference(const std::string& arch) {
  std::string error;
  auto engine = TestEngine::Make(Options(arch), DType::kFloat32, kTokensPerBlock, &error);
  EXPECT_NE(engine, nullptr) << error;
  if (engine == nullptr) return {};
  auto runner = engine->Runner(kNumBlocks * kTokensPerBlock);
  return runner != nullptr ? RunWithRunner(*runner) : StepLogits{};
}

// Runs `rank(tp_rank, pp_rank)` on a thread per rank; returns the logits of each rank of the
// first stage (by tp rank), which answer the step.
std::vector<StepLogits> RunRanks(std::int32_t tp, std::int32_t pp,
                                 const std::function<StepLogits(Collectives&)>& rank) {
  ThreadGroup group(tp, pp);
  std::vector<StepLogits> first_stage(static_cast<std::size_t>(tp));
  std::vector<std::thread> threads;
  for (std::int32_t p = 0; p < pp; ++p) {
    for (std::int32_t t = 0; t < tp; ++t) {
      threads.emplace_back([&, t, p] {
        ThreadGroup::Member member(group, t, p);
        StepLogits logits = rank(member);
        if (p == 0) first_stage[static_cast<std::size_t>(t)] = std::move(logits);
      });
    }
  }
  for (std::thread& th : threads) th.join();
  return first_stage;
}

// One rank's runner on `engine_dir`, stepping Steps().
StepLogits RunRunner(const std::string& engine_dir, Collectives& member) {
  RunnerOptions o;
  o.max_kv_tokens = kNumBlocks * kTokensPerBlock;
  o.num_threads = 1;
  // The runner shares ownership; the member outlives it (the thread's frame).
  o.collectives = std::shared_ptr<Collectives>(&member, [](Collectives*) {});
  auto runner = CreateCpuModelRunner(engine_dir, o);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  // NOTE: a rank that failed to load still has to answer its peers' collectives, or they
  // wait forever; with no runner it cannot, so the test stops here.
  if (!runner.ok()) std::abort();
  return RunWithRunner(**runner);
}

void ExpectMatches(const std::vector<StepLogits>& ranks, const StepLogits& reference,
                   const std::string& what) {
  ASSERT_FALSE(reference.empty());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    ASSERT_EQ(ranks[r].size(), reference.size()) << what << " rank " << r;
    for (std::size_t step = 0; step < reference.size(); ++step) {
      const std::vector<float>& got = ranks[r][step];
      const std::vector<float>& want = reference[step];
      ASSERT_EQ(got.size(), want.size()) << what << " rank " << r << " step " << step;
      EXPECT_LT(NormalisedError(got.data(), want.data(), want.size()), 2e-5)
          << what << " rank " << r << " step " << step;
      // Every rank sums the partials in the same order and gathers the same columns.
      EXPECT_EQ(std::memcmp(got.data(), ranks[0][step].data(), got.size() * sizeof(float)), 0)
          << what << " rank " << r << " step " << step << " differs from rank 0";
    }
  }
}

class ShardedForwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShardedForwardTest, TensorParallelRunnersMatchOneRank) {
  const StepLogits reference = Reference(GetParam());
  // gpt2 has 4 kv heads: tp 4 gives each rank one; llama's 2 kv heads are replicated at tp 4.
  for (const std::int32_t tp : {2, 4}) {
    std::string error;
    auto engine =
        TestEngine::Make(Options(GetParam()), DType::kFloat32, kTokensPerBlock, &error, tp);
    ASSERT_NE(engine, nullptr) << error;
    const std::vector<StepLogits> ranks = RunRanks(
        tp, 1, [&](Collectives& member) { return RunRunner(engine->engine_dir(), member); });
    ExpectMatches(ranks, reference, GetParam() + " tp " + std::to_string(tp));
  }
}

TEST_P(ShardedForwardTest, PipelineStagesMatchOneStage) {
  const StepLogits reference = Reference(GetParam());
  for (const std::int32_t tp : {1, 2}) {
    std::string error;
    // Stage 0 runs one of the 3 layers, stage 1 two; each loads its own rank file.
    auto engine =
        TestEngine::Make(Options(GetParam()), DType::kFloat32, kTokensPerBlock, &error, tp, 2);
    ASSERT_NE(engine, nullptr) << error;
    const std::vector<StepLogits> ranks = RunRanks(
        tp, 2, [&](Collectives& member) { return RunRunner(engine->engine_dir(), member); });
    ExpectMatches(ranks, reference, GetParam() + " tp " + std::to_string(tp) + " x pp 2");
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, ShardedForwardTest, ::testing::Values("llama", "gpt2"),
                         [](const auto& info) { return info.param; });

TEST(ModelShardTest, LayerRangesVocabularySlicesAndErrors) {
  EngineConfig c;
  c.num_layers = 5;
  c.num_attention_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 96;
  c.vocab_size = 1001;
  c.tp_size = 4;
  c.pp_size = 2;
  auto first = MakeModelShard(c, 3, 4, 0, 2);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->first_layer, 0);
  EXPECT_EQ(first->last_layer, 2);
  EXPECT_TRUE(first->first_stage());
  EXPECT_FALSE(first->last_stage());
  EXPECT_EQ(first->num_q_heads, 2);
  EXPECT_EQ(first->num_kv_heads, 1);  // 2 kv heads over 4 ranks: replicated
  EXPECT_EQ(first->intermediate_size, 24);
  EXPECT_EQ(first->vocab_begin, 750);  // 3 * 1001 / 4
  EXPECT_EQ(first->vocab_end, 1001);
  EXPECT_EQ(first->file_name(), "rank3.safetensors");
  auto last = MakeModelShard(c, 1, 4, 1, 2);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(last->first_layer, 2);
  EXPECT_EQ(last->last_layer, 5);
  EXPECT_EQ(last->file_name(), "rank5.safetensors");

  auto wrong_size = MakeModelShard(c, 0, 1, 0, 1);
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_NE(wrong_size.status().message().find("tp_size 4, pp_size 2"), std::string::npos)
      << wrong_size.status().message();
  EXPECT_NE(wrong_size.status().message().find("tp_size 1, pp_size 1"), std::string::npos)
      << wrong_size.status().message();
  auto bad_rank = MakeModelShard(c, 4, 4, 0, 2);
  ASSERT_FALSE(bad_rank.ok());
  EXPECT_NE(bad_rank.status().message().find("tp_rank 4 is not in [0, 4)"), std::string::npos)
      << bad_rank.status().message();
  c.num_layers = 1;
  auto too_many_stages = MakeModelShard(c, 0, 4, 0, 2);
  ASSERT_FALSE(too_many_stages.ok());
  EXPECT_NE(too_many_stages.status().message().find("pp_size 2 is more than num_layers 1"),
            std::string::npos)
      << too_many_stages.status().message();
}

TEST(ShardedRunnerTest, OneProcessRefusesATensorParallelEngine) {
  std::string error;
  auto engine = TestEngine::Make(Options("llama"), DType::kFloat32, kTokensPerBlock, &error, 2);
  ASSERT_NE(engine, nullptr) << error;
  RunnerOptions o;
  o.max_kv_tokens = kNumBlocks * kTokensPerBlock;
  auto runner = CreateCpuModelRunner(engine->engine_dir(), o);
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(runner.status().message().find("built for tp_size 2, pp_size 1"), std::string::npos)
      << runner.status().message();
  EXPECT_NE(runner.status().message().find("process group has tp_size 1"), std::string::npos)
      << runner.status().message();
}

}  // namespace
}  // namespace inflight::model
