// CpuModelRunner split over processes (mpirun -n 2: tp 2, pp 2; -n 4: tp 4, tp 2 x pp 2, pp 4;
// -n 8: tp 8, tp 2 x pp 4),
// each rank loading its own rank file of an engine the builder wrote with --tp_size / --pp_size,
// with MpiCollectives between them. Every rank steps the same StepInputs (a prompt step of two
// sequences, then decode steps); rank 0's logits must match the whole engine's (tp 1, in one
// process) within fp32 reduction-order rounding, the first and last stages' ranks must hold the
// same bits as rank 0, and a stage in between none (model_runner.h's contract).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/mpi_collectives.h"
#include "mpi_world.h"
#include "split_cpu_runner.h"
#include "split_test_model.h"
#include "unit/model_cpu/test_engine.h"

namespace inflight::model {
namespace {

using inflight::testing::mpi_world::AllRanks;
using inflight::testing::mpi_world::ShareString;
using inflight::testing::mpi_world::WorldRank;
using inflight::testing::mpi_world::WorldSize;

using testing::MakeSplitCpuRunner;
using testing::NormalisedError;
using testing::SplitTestModel;
using testing::TestEngine;

constexpr std::int32_t kTokensPerBlock = 4;
constexpr std::int64_t kNumBlocks = 8;
constexpr std::int64_t kVocab = testing::kSplitTestVocab;

// Two sequences: prompts of 9 (every row's logits) and 5 tokens (the last row's), then three
// decode steps of both.
std::vector<StepInput> Steps() {
  std::mt19937_64 rng(23);
  std::uniform_int_distribution<TokenIdType> token(0, kVocab - 1);
  const std::vector<std::vector<std::int32_t>> tables{{6, 1, 4}, {2, 7}};  // not monotonic
  const std::vector<std::int32_t> prompt{9, 5};
  std::vector<StepInput> steps;
  for (int step = 0; step < 4; ++step) {
    StepInput in;
    for (std::size_t s = 0; s < 2; ++s) {
      SequenceStep seq;
      seq.seq_id = static_cast<std::int64_t>(s);
      const std::int32_t n = step == 0 ? prompt[s] : 1;
      for (std::int32_t i = 0; i < n; ++i) seq.tokens.push_back(token(rng));
      seq.num_cached = step == 0 ? 0 : prompt[s] + step - 1;
      seq.block_table = tables[s];
      seq.logits = step == 0 && s == 0 ? SequenceStep::Logits::kAll : SequenceStep::Logits::kLast;
      in.sequences.push_back(std::move(seq));
    }
    steps.push_back(std::move(in));
  }
  return steps;
}

struct Layout {
  std::int32_t tp, pp;
};

// The layouts of the world's size that the model's heads allow (tp 8 needs llama8's 8 heads,
// which runs only there, to keep the 2- and 4-rank runs short).
std::vector<Layout> Layouts(const std::string& name) {
  const bool eight_heads = name == "llama8";
  switch (WorldSize()) {
    case 2:
      return eight_heads ? std::vector<Layout>{} : std::vector<Layout>{{2, 1}, {1, 2}};
    case 4:
      return eight_heads ? std::vector<Layout>{} : std::vector<Layout>{{4, 1}, {2, 2}, {1, 4}};
    case 8:
      return eight_heads ? std::vector<Layout>{{8, 1}, {2, 4}} : std::vector<Layout>{};
    default:
      return {};
  }
}

class MpiRunnerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MpiRunnerTest, SplitEnginesMatchTheWholeEngine) {
  const std::vector<Layout> layouts = Layouts(GetParam());
  if (layouts.empty()) GTEST_SKIP() << "not at this world size";
  const int rank = WorldRank();
  const std::vector<StepInput> steps = Steps();

  // The whole engine's logits, in rank 0.
  std::vector<std::vector<float>> reference;
  if (rank == 0) {
    std::string error;
    auto whole =
        TestEngine::Make(SplitTestModel(GetParam()), DType::kFloat32, kTokensPerBlock, &error);
    ASSERT_NE(whole, nullptr) << error;
    auto runner = whole->Runner(kNumBlocks * kTokensPerBlock, 1);
    ASSERT_NE(runner, nullptr);
    for (const StepInput& in : steps) {
      auto out = runner->Step(in);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      reference.push_back(out->logits);
    }
  }

  for (const Layout& l : layouts) {
    const std::string name =
        GetParam() + " tp " + std::to_string(l.tp) + " x pp " + std::to_string(l.pp);
    std::unique_ptr<TestEngine> engine;
    std::string error;
    if (rank == 0) {
      engine = TestEngine::Make(SplitTestModel(GetParam()), DType::kFloat32, kTokensPerBlock,
                                &error, l.tp, l.pp);
      EXPECT_NE(engine, nullptr) << error;
    }
    const std::string dir = ShareString(engine != nullptr ? engine->engine_dir() : "");
    ASSERT_FALSE(dir.empty()) << name << ": rank 0 could not build the engine";

    auto split = MakeSplitCpuRunner(dir, l.tp, l.pp, kNumBlocks * kTokensPerBlock);
    EXPECT_TRUE(split.ok()) << name << ": " << split.status().ToString();
    ASSERT_TRUE(AllRanks(split.ok())) << name << ": a rank could not load its shard";
    const Collectives& c = *split->group;
    const bool first = c.pp_rank() == 0, last = c.pp_rank() == l.pp - 1;

    for (std::size_t step = 0; step < steps.size(); ++step) {
      auto out = split->runner->Step(steps[step]);
      ASSERT_TRUE(out.ok()) << name << " step " << step << ": " << out.status().ToString();
      EXPECT_EQ(out->vocab_size, kVocab);
      EXPECT_EQ(out->row_begin,
                (step == 0 ? std::vector<std::int32_t>{0, 9} : std::vector<std::int32_t>{0, 1}));
      const std::size_t rows = step == 0 ? 10 : 2;
      if (!first && !last) {
        EXPECT_TRUE(out->logits.empty()) << name << " stage " << c.pp_rank();
        // Rank 0's logits still travel to everyone below.
        out->logits.assign(rows * kVocab, 0.0f);
      } else {
        ASSERT_EQ(out->logits.size(), rows * kVocab) << name << " step " << step;
      }
      if (rank == 0) {
        const std::vector<float>& want = reference[step];
        ASSERT_EQ(out->logits.size(), want.size());
        EXPECT_LT(NormalisedError(out->logits.data(), want.data(), want.size()), 2e-5)
            << name << " step " << step;
      }
      std::vector<float> rank0 = out->logits;
      MPI_Bcast(rank0.data(), static_cast<int>(rank0.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
      if (first || last) {
        EXPECT_EQ(std::memcmp(rank0.data(), out->logits.data(), rank0.size() * sizeof(float)), 0)
            << name << " step " << step << ": tp_rank " << c.tp_rank() << " pp_rank " << c.pp_rank()
            << " differs from rank 0";
      }
    }
    split->runner.reset();
    MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the files before rank 0 removes them
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, MpiRunnerTest, ::testing::Values("gpt2", "llama", "llama8"),
                         [](const auto& info) { return info.param; });

// An engine split for a group of another shape is refused at load, naming both shapes.
TEST(MpiRunnerShapeTest, RefusesAGroupOfAnotherShape) {
  if (WorldSize() != 2) GTEST_SKIP() << "runs under mpirun -n 2";
  std::unique_ptr<TestEngine> engine;
  std::string error;
  if (WorldRank() == 0) {
    engine =
        TestEngine::Make(SplitTestModel("llama"), DType::kFloat32, kTokensPerBlock, &error, 1, 2);
    EXPECT_NE(engine, nullptr) << error;
  }
  const std::string dir = ShareString(engine != nullptr ? engine->engine_dir() : "");
  ASSERT_FALSE(dir.empty());
  auto collectives = CreateMpiCollectives(MPI_COMM_WORLD, 2, 1);
  ASSERT_TRUE(collectives.ok()) << collectives.status().ToString();
  RunnerOptions ro;
  ro.max_kv_tokens = kNumBlocks * kTokensPerBlock;
  ro.collectives = *collectives;
  auto runner = CreateCpuModelRunner(dir, ro);
  ASSERT_FALSE(runner.ok());
  EXPECT_NE(runner.status().message().find("built for tp_size 1, pp_size 2; this runner's process "
                                           "group has tp_size 2, pp_size 1"),
            std::string::npos)
      << runner.status().message();
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace inflight::model
