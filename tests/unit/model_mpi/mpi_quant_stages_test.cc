// Quantized engines split into pipeline stages (mpirun -n 2: pp 2; -n 4: pp 4, and tp 2 x pp 2 for
// the weight-only formats): each stage file holds its layers' quantized parts (and FP8 KV cache
// scales) only, and the CPU runners of the stages, stepping together, give rank 0 the logits of the
// whole quantized engine in one process within fp32 reduction-order rounding (the quantized values
// are the same: the builder quantizes a weight whole, then slices it). FP8 at tp 2 is left out: its
// activations are scaled per token over each rank's slice, so its values differ by design.
#include <gtest/gtest.h>
#include <mpi.h>

#include <random>
#include <string>
#include <vector>

#include "model/safetensors.h"
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
constexpr std::int64_t kKvTokens = std::int64_t{8} * kTokensPerBlock;

struct Format {
  std::string name;
  QuantAlgo algo;
  bool kv_fp8;
  bool splits_over_tp;  // the same values at tp > 1 (weight-only: activations stay float)
};

const std::vector<Format>& Formats() {
  static const std::vector<Format> formats{
      {"fp8_kvfp8", QuantAlgo::kFp8, true, false},
      {"int4_wo", QuantAlgo::kInt4Wo, false, true},
      {"int8_wo_kvfp8", QuantAlgo::kInt8Wo, true, true},
  };
  return formats;
}

void Quantize(const Format& f, BuildOptions& b) {
  b.qformat = f.algo;
  b.kv_cache_fp8 = f.kv_fp8;
  if (f.algo == QuantAlgo::kInt4Wo) b.group_size = 32;
}

// A prompt of 9 tokens (every row's logits), then two decode steps.
std::vector<StepInput> Steps() {
  std::mt19937_64 rng(43);
  std::uniform_int_distribution<TokenIdType> token(0, testing::kSplitTestVocab - 1);
  std::vector<StepInput> steps;
  for (int step = 0; step < 3; ++step) {
    SequenceStep seq;
    seq.seq_id = 0;
    const int n = step == 0 ? 9 : 1;
    for (int i = 0; i < n; ++i) seq.tokens.push_back(token(rng));
    seq.num_cached = step == 0 ? 0 : 9 + step - 1;
    seq.block_table = {5, 0, 3};
    seq.logits = step == 0 ? SequenceStep::Logits::kAll : SequenceStep::Logits::kLast;
    StepInput in;
    in.sequences.push_back(std::move(seq));
    steps.push_back(std::move(in));
  }
  return steps;
}

// The names in every rank file of `dir`, rank by rank.
std::vector<std::vector<std::string>> TensorNames(const std::string& dir, int files) {
  std::vector<std::vector<std::string>> names;
  for (int r = 0; r < files; ++r) {
    auto file = SafetensorsFile::Open(dir + "/rank" + std::to_string(r) + ".safetensors");
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    names.emplace_back();
    if (file.ok()) names.back() = (*file)->names();
  }
  return names;
}

class MpiQuantStagesTest : public ::testing::TestWithParam<Format> {};

TEST_P(MpiQuantStagesTest, StagesGiveTheWholeQuantizedEnginesLogits) {
  const Format& f = GetParam();
  const int n = WorldSize(), rank = WorldRank();
  if (n != 2 && n != 4) GTEST_SKIP() << "not at this world size";
  struct Layout {
    std::int32_t tp, pp;
  };
  std::vector<Layout> layouts{{1, n}};
  if (n == 4 && f.splits_over_tp) layouts.push_back({2, 2});
  const std::vector<StepInput> steps = Steps();
  auto quantize = [&f](BuildOptions& b) { Quantize(f, b); };

  std::vector<std::vector<float>> reference;
  std::string error;
  if (rank == 0) {
    auto whole = TestEngine::Make(SplitTestModel("llama"), DType::kFloat32, kTokensPerBlock, &error,
                                  1, 1, quantize);
    ASSERT_NE(whole, nullptr) << error;
    auto runner = whole->Runner(kKvTokens, 1);
    ASSERT_NE(runner, nullptr);
    for (const StepInput& in : steps) {
      auto out = runner->Step(in);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      reference.push_back(out->logits);
    }
  }

  for (const Layout& l : layouts) {
    const std::string name =
        f.name + " tp " + std::to_string(l.tp) + " x pp " + std::to_string(l.pp);
    std::unique_ptr<TestEngine> engine;
    if (rank == 0) {
      engine = TestEngine::Make(SplitTestModel("llama"), DType::kFloat32, kTokensPerBlock, &error,
                                l.tp, l.pp, quantize);
      EXPECT_NE(engine, nullptr) << error;
      if (engine != nullptr) {
        // A stage's file: its layers' tensors only, and a KV scale for each of them.
        const auto names = TensorNames(engine->engine_dir(), l.tp * l.pp);
        for (int file = 0; file < l.tp * l.pp; ++file) {
          const int stage = file / l.tp, per = 4 / l.pp;
          int kv_scales = 0;
          for (const std::string& t : names[static_cast<std::size_t>(file)]) {
            if (t.rfind("layers.", 0) != 0) continue;
            const int layer = std::stoi(t.substr(7));
            EXPECT_TRUE(layer >= stage * per && layer < (stage + 1) * per)
                << name << " file " << file << " holds " << t;
            if (t.find("kv_cache_scale") != std::string::npos) ++kv_scales;
          }
          EXPECT_EQ(kv_scales, f.kv_fp8 ? per : 0) << name << " file " << file;
        }
      }
    }
    const std::string dir = ShareString(engine != nullptr ? engine->engine_dir() : "");
    ASSERT_FALSE(dir.empty()) << name << ": rank 0 could not build the engine";

    auto split = MakeSplitCpuRunner(dir, l.tp, l.pp, kKvTokens);
    EXPECT_TRUE(split.ok()) << name << ": " << split.status().ToString();
    ASSERT_TRUE(AllRanks(split.ok())) << name << ": a rank could not load its stage";
    for (std::size_t step = 0; step < steps.size(); ++step) {
      auto out = split->runner->Step(steps[step]);
      ASSERT_TRUE(out.ok()) << name << " step " << step << ": " << out.status().ToString();
      if (rank != 0) continue;
      const std::vector<float>& want = reference[step];
      ASSERT_EQ(out->logits.size(), want.size()) << name << " step " << step;
      EXPECT_LT(NormalisedError(out->logits.data(), want.data(), want.size()), 2e-5)
          << name << " step " << step;
    }
    split->runner.reset();
    MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the files before rank 0 removes them
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, MpiQuantStagesTest, ::testing::ValuesIn(Formats()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace inflight::model
