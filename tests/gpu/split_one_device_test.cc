// The CUDA runner split over tp x pp ranks that share this process's one GPU, a thread per rank,
// their collectives moved through host memory (staged_thread_collectives.h). Rank 0's logits
// against the CPU runner on the whole engine, float and quantized (FP8 + FP8 KV, int8_wo,
// int4_wo), at tp 2, tp 4 (fewer KV heads than ranks), pp 2, pp 4 and tp 2 x pp 2; and greedy
// generation with micro-batches in flight at pp 2 and tp 2 x pp 2 against the whole engine's
// tokens on the same GPU. gpu_nccl_collectives_test checks the same runner over NCCL on several
// GPUs; this one needs one GPU, and leaves out only the transport. Decode graphs are off (the
// staged collectives wait on the host, which a capture cannot). Main build only; skipped (77)
// without a device.
#include <gtest/gtest.h>

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/cuda_model_runner.h"
#include "nccl_test_model.h"
#include "split_runner_steps.h"
#include "staged_thread_collectives.h"
#include "unit/model_cpu/test_engine.h"

namespace inflight::model {
namespace {

using testing::ExpectSplitStepMatches;
using testing::Generate;
using testing::RandomSteps;
using testing::SmallLlama;
using testing::StagedThreadCollectives;
using testing::StepLogits;
using testing::TestEngine;
using testing::ThreadGroup;
using testing::WholeEngineLogits;
using testing::WholeLogits;

constexpr std::int64_t kKvTokens = 64;

// The ranks of one split engine, each a CUDA runner on device 0, created one after another (a
// runner makes no collective call until its first step).
class Ranks {
 public:
  Ranks(const std::string& engine_dir, int tp, int pp) : group_(tp, pp) {
    for (int p = 0; p < pp; ++p) {
      for (int t = 0; t < tp; ++t) {
        CudaRunnerOptions o;
        o.max_kv_tokens = kKvTokens;
        o.collectives = std::make_shared<StagedThreadCollectives>(group_, t, p);
        auto r = CreateCudaModelRunner(engine_dir, o);
        EXPECT_TRUE(r.ok()) << "tp " << tp << " x pp " << pp << " rank " << runners_.size() << ": "
                            << r.status().ToString();
        if (!r.ok()) return;
        runners_.push_back(std::move(r).value());
      }
    }
  }
  // Every rank's runner was created.
  bool ok() const { return size() == group_.tp_size() * group_.pp_size(); }
  int size() const { return static_cast<int>(runners_.size()); }

  // fn(runner, group rank) on a thread per rank (group rank = pp rank x tp + tp rank); returns when
  // every rank has.
  void Run(const std::function<void(ModelRunner&, int)>& fn) {
    std::vector<std::thread> threads;
    threads.reserve(runners_.size());
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] { fn(*runners_[static_cast<std::size_t>(r)], r); });
    }
    for (std::thread& t : threads) t.join();
  }

 private:
  ThreadGroup group_;  // outlives the runners, whose collectives refer to it
  std::vector<std::unique_ptr<ModelRunner>> runners_;
};

// Generate's share over the ranks' threads: rank 0's token on every rank.
class ThreadBroadcast {
 public:
  explicit ThreadBroadcast(int ranks) : barrier_(ranks) {}
  std::function<TokenIdType(TokenIdType)> For(int rank) {
    return [this, rank](TokenIdType token) {
      if (rank == 0) value_ = token;
      barrier_.arrive_and_wait();  // rank 0's value is written
      token = value_;
      barrier_.arrive_and_wait();  // every rank has read it
      return token;
    };
  }

 private:
  std::barrier<> barrier_;
  TokenIdType value_ = -1;
};

std::string SplitName(const std::string& what, int tp, int pp) {
  return what + " tp " + std::to_string(tp) + " x pp " + std::to_string(pp);
}

// Rank 0's logits of each step of the CUDA runner on the engine in `dir` split at tp x pp over
// threads; empty when a rank's runner could not be created.
std::vector<std::vector<float>> CudaLogits(const std::string& name, const std::string& dir, int tp,
                                           int pp, const std::vector<StepInput>& steps) {
  std::vector<std::vector<float>> logits;
  Ranks ranks(dir, tp, pp);
  if (!ranks.ok()) return logits;
  ranks.Run([&](ModelRunner& runner, int rank) {
    // A failed step leaves the others waiting in a collective: ctest's timeout ends the run.
    auto mine = StepLogits(runner, steps, name + " rank " + std::to_string(rank));
    if (rank == 0) logits = std::move(mine);
  });
  return logits;
}

// The engine of `o` (built with `adjust`) split at tp x pp, on threads, against the same engine
// whole on this GPU and on the CPU runner (ExpectSplitStepMatches).
void ExpectSplitMatchesWhole(const std::string& what, const RandomCheckpointOptions& o, int tp,
                             int pp, const std::function<void(BuildOptions&)>& adjust,
                             bool fp8 = false) {
  const std::string name = SplitName(what, tp, pp);
  std::string error;
  auto whole = TestEngine::Make(o, DType::kBFloat16, 4, &error, 1, 1, adjust);
  ASSERT_NE(whole, nullptr) << name << ": " << error;
  auto split = TestEngine::Make(o, DType::kBFloat16, 4, &error, tp, pp, adjust);
  ASSERT_NE(split, nullptr) << name << ": " << error;
  const std::vector<StepInput> steps = RandomSteps(9, 11, {3, 0, 5, 1});
  const WholeEngineLogits want = WholeLogits(*whole, steps, kKvTokens, name);
  const auto got = CudaLogits(name, split->engine_dir(), tp, pp, steps);
  ASSERT_EQ(want.cpu.size(), steps.size()) << name;
  ASSERT_EQ(want.gpu.size(), steps.size()) << name;
  ASSERT_EQ(got.size(), steps.size()) << name;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    ExpectSplitStepMatches(name, i, got[i], want.gpu[i], want.cpu[i], tp, fp8);
  }
}

const std::pair<int, int> kSplits[] = {{2, 1}, {4, 1}, {1, 2}, {1, 4}, {2, 2}};

TEST(SplitOneDeviceTest, SplitEnginesMatchTheWholeEngine) {
  const RandomCheckpointOptions o = SmallLlama();
  for (const auto& [tp, pp] : kSplits) ExpectSplitMatchesWhole("bf16", o, tp, pp, nullptr);
}

// Each stage's file holds its own layers' weights, scales (and KV scales); each tp rank its
// shard's.
TEST(SplitOneDeviceTest, QuantizedSplitsMatchTheWholeQuantizedEngine) {
  const RandomCheckpointOptions o = SmallLlama(5);
  const std::pair<QuantAlgo, bool> formats[] = {
      {QuantAlgo::kFp8, true}, {QuantAlgo::kInt8Wo, false}, {QuantAlgo::kInt4Wo, false}};
  for (const auto& [algo, kv_fp8] : formats) {
    const auto quantize = [algo = algo, kv_fp8 = kv_fp8](BuildOptions& b) {
      b.qformat = algo;
      b.kv_cache_fp8 = kv_fp8;
    };
    const std::string what = std::string(QuantAlgoName(algo)) + (kv_fp8 ? " + fp8 kv" : "");
    for (const auto& [tp, pp] : kSplits) {
      // int4_wo's scale groups of 128 columns: tp 4 would cut the 256 inputs of o_proj into 64
      // (the builder refuses that by name).
      if (algo == QuantAlgo::kInt4Wo && tp == 4) continue;
      ExpectSplitMatchesWhole(what, o, tp, pp, quantize, algo == QuantAlgo::kFp8);
    }
  }
}

// Micro-batches in flight (the first stage keeps pp steps launched): the greedy tokens equal the
// whole engine's on this GPU, and the same split's one step at a time.
TEST(SplitOneDeviceTest, PipelineMicroBatchesGiveTheWholeEnginesTokens) {
  unsetenv("INFLIGHT_CUDA_PIPELINE_MICRO_BATCHES");  // on unless it is 0 (cuda_model_runner.cc)
  const RandomCheckpointOptions o = SmallLlama();
  constexpr int kSeqs = 3, kNew = 6;
  std::string error;
  auto whole = TestEngine::Make(o, DType::kBFloat16, 4, &error);
  ASSERT_NE(whole, nullptr) << error;
  CudaRunnerOptions wo;
  wo.max_kv_tokens = kKvTokens;
  auto tp1 = CreateCudaModelRunner(whole->engine_dir(), wo);
  ASSERT_TRUE(tp1.ok()) << tp1.status().ToString();
  const auto want = Generate(**tp1, 1, kSeqs, kNew, true, [](TokenIdType t) { return t; });
  ASSERT_EQ(want.size(), static_cast<std::size_t>(kSeqs));
  tp1->reset();
  for (const std::pair<int, int>& shape : {std::pair{1, 2}, std::pair{2, 2}}) {
    const int tp = shape.first, pp = shape.second;  // named: clang 14's lambdas take no bindings
    const std::string name = SplitName("bf16", tp, pp);
    auto split = TestEngine::Make(o, DType::kBFloat16, 4, &error, tp, pp);
    ASSERT_NE(split, nullptr) << name << ": " << error;
    Ranks ranks(split->engine_dir(), tp, pp);
    ASSERT_TRUE(ranks.ok()) << name;
    ThreadBroadcast broadcast(ranks.size());
    std::vector<std::vector<TokenIdType>> pipelined, one_at_a_time;
    ranks.Run([&](ModelRunner& runner, int rank) {
      EXPECT_EQ(runner.max_steps_in_flight(), rank < tp ? pp : 1) << name << " rank " << rank;
      // Every rank keeps as many launched as the first stage does (the others finish each in
      // Launch).
      const auto share = broadcast.For(rank);
      auto a = Generate(runner, static_cast<std::size_t>(pp), kSeqs, kNew, rank == 0, share);
      auto b = Generate(runner, 1, kSeqs, kNew, rank == 0, share);
      if (rank == 0) {
        pipelined = std::move(a);
        one_at_a_time = std::move(b);
      }
    });
    EXPECT_EQ(pipelined, want) << name << ": " << pp << " micro-batches in flight vs tp 1";
    EXPECT_EQ(one_at_a_time, want) << name << ": one step at a time vs tp 1";
  }
}

}  // namespace
}  // namespace inflight::model

int main(int argc, char** argv) {
  if (!inflight::model::CudaDeviceAvailable()) {
    std::fprintf(stderr, "skipped: no CUDA device\n");
    return 77;
  }
  setenv("INFLIGHT_CUDA_GRAPHS", "0", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
