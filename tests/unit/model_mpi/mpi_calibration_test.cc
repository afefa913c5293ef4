// The calibration pass split over processes (model/fp8_calibration_mpi.h; mpirun -n 2: tp 2 and
// pp 2; -n 4: tp 4 and tp 2 x pp 2): every rank runs the same samples through its rank of the split
// float engine, and the group's fold must give every rank the amax of the whole engine run in one
// process, at every point of every layer, within fp32 reduction-order rounding. Then the tool's
// path (CalibrateFromDataset at tp = world size): rank 0 writes and removes the float engine, and
// the static scales it returns are the one-process calibration's.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "model/fp8_calibration_mpi.h"
#include "mpi_world.h"
#include "split_test_model.h"
#include "unit/model_cpu/test_engine.h"

namespace inflight::model {
namespace {

namespace fs = std::filesystem;
using inflight::testing::mpi_world::ShareString;
using inflight::testing::mpi_world::WorldRank;
using inflight::testing::mpi_world::WorldSize;
using testing::SplitTestModel;
using testing::TestEngine;

constexpr std::int32_t kTokensPerBlock = 4;
constexpr std::int64_t kVocab = testing::kSplitTestVocab;

// Five samples of 3-17 random ids: several a step, of uneven lengths.
std::vector<VecTokens> Samples() {
  std::mt19937_64 rng(31);
  std::uniform_int_distribution<TokenIdType> token(0, kVocab - 1);
  std::vector<VecTokens> samples;
  for (int len : {17, 3, 11, 8, 14}) {
    VecTokens s;
    for (int i = 0; i < len; ++i) s.push_back(token(rng));
    samples.push_back(std::move(s));
  }
  return samples;
}

struct Layout {
  std::int32_t tp, pp;
};

std::vector<Layout> Layouts() {
  switch (WorldSize()) {
    case 2:
      return {{2, 1}, {1, 2}};
    case 4:
      return {{4, 1}, {2, 2}};
    default:
      return {};
  }
}

// Every point of every layer within `rel` of the reference's, and above zero (each stage's layers
// filled by the fold, not only this rank's).
void ExpectSameAmax(const ActivationAmax& got, const ActivationAmax& want, double rel,
                    const std::string& name) {
  ASSERT_EQ(got.layers.size(), want.layers.size()) << name;
  for (std::size_t l = 0; l < want.layers.size(); ++l) {
    for (int p = 0; p < kNumAmaxPoints; ++p) {
      const float w = want.layers[l][static_cast<std::size_t>(p)];
      const float g = got.layers[l][static_cast<std::size_t>(p)];
      EXPECT_GT(w, 0.0f) << name << " layer " << l << " point " << p;
      EXPECT_NEAR(g, w, rel * w) << name << " layer " << l << " point " << p;
    }
  }
}

TEST(MpiCalibrationTest, SplitPassFoldsToTheWholeEnginesAmax) {
  const std::vector<Layout> layouts = Layouts();
  if (layouts.empty()) GTEST_SKIP() << "not at this world size";
  const int rank = WorldRank();
  const std::vector<VecTokens> samples = Samples();
  CalibrationRun whole_run;
  whole_run.device = CalibrationDevice::kCpu;
  whole_run.num_threads = 1;

  std::unique_ptr<TestEngine> whole;
  std::string error;
  if (rank == 0) {
    whole = TestEngine::Make(SplitTestModel("llama"), DType::kFloat32, kTokensPerBlock, &error);
    EXPECT_NE(whole, nullptr) << error;
  }
  const std::string whole_dir = ShareString(whole != nullptr ? whole->engine_dir() : "");
  ASSERT_FALSE(whole_dir.empty()) << "rank 0 could not build the whole engine";
  // Every rank computes the reference itself: the tiny model is quick, and no broadcast is needed.
  const Result<ActivationAmax> reference = ObserveActivationAmax(whole_dir, samples, whole_run);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();

  for (const Layout& l : layouts) {
    const std::string name = "tp " + std::to_string(l.tp) + " x pp " + std::to_string(l.pp);
    std::unique_ptr<TestEngine> split;
    if (rank == 0) {
      split = TestEngine::Make(SplitTestModel("llama"), DType::kFloat32, kTokensPerBlock, &error,
                               l.tp, l.pp);
      EXPECT_NE(split, nullptr) << error;
    }
    const std::string dir = ShareString(split != nullptr ? split->engine_dir() : "");
    ASSERT_FALSE(dir.empty()) << name << ": rank 0 could not build the engine";
    auto group = CreateMpiCalibrationGroup(MPI_COMM_WORLD, l.tp, l.pp, CalibrationDevice::kCpu, 0);
    ASSERT_TRUE(group.ok()) << group.status().ToString();
    EXPECT_EQ((*group)->rank(), rank);
    EXPECT_EQ((*group)->ranks_on_this_host(), WorldSize());  // mpirun on one host
    CalibrationRun run = whole_run;
    run.group = *group;
    const Result<ActivationAmax> amax = ObserveActivationAmax(dir, samples, run);
    ASSERT_TRUE(amax.ok()) << name << ": " << amax.status().ToString();
    EXPECT_EQ(amax->samples, reference->samples) << name;
    EXPECT_EQ(amax->tokens, reference->tokens) << name;
    ExpectSameAmax(*amax, *reference, 1e-4, name);
    MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with `dir` before rank 0 removes it
  }
}

TEST(MpiCalibrationTest, ANaNOnOneRankIsNaNOnEvery) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  auto group =
      CreateMpiCalibrationGroup(MPI_COMM_WORLD, WorldSize(), 1, CalibrationDevice::kCpu, 0);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  ActivationAmax amax;
  amax.layers.assign(2, {});
  // Rank r holds r + 1 at layer 0's points; the last rank saw NaN at layer 1's key.
  for (auto& v : amax.layers[0]) v = static_cast<float>(WorldRank() + 1);
  if (WorldRank() == WorldSize() - 1) {
    amax.layers[1][static_cast<std::size_t>(AmaxPoint::kKey)] = std::nanf("");
  }
  ASSERT_TRUE((*group)->FoldAmax(amax).ok());
  for (float v : amax.layers[0]) EXPECT_EQ(v, static_cast<float>(WorldSize()));
  EXPECT_TRUE(std::isnan(amax.at(1, AmaxPoint::kKey)));
  EXPECT_EQ(amax.at(1, AmaxPoint::kValue), 0.0f);
}

// inflight-build's path under mpirun at --tp_size = the world's size: rank 0 writes the float
// engine beside the output, every rank runs its rank, the folder is gone after, and every rank
// returns the one-process calibration.
TEST(MpiCalibrationTest, CalibrateFromDatasetOverTheWorldMatchesOneProcess) {
  if (WorldSize() != 2 && WorldSize() != 4) GTEST_SKIP() << "not at this world size";
  const int rank = WorldRank();
  std::unique_ptr<TestEngine> source;
  std::string error;
  if (rank == 0) {
    source = TestEngine::Make(SplitTestModel("llama"), DType::kFloat32, kTokensPerBlock, &error);
    EXPECT_NE(source, nullptr) << error;
  }
  const std::string ckpt = ShareString(source != nullptr ? source->checkpoint_dir() : "");
  ASSERT_FALSE(ckpt.empty());
  const fs::path root = fs::path(ckpt).parent_path();
  const std::string data = (root / "samples.jsonl").string();
  if (rank == 0) {
    std::ofstream f(data);
    for (const VecTokens& s : Samples()) {
      f << "{\"input_ids\": [";
      for (std::size_t i = 0; i < s.size(); ++i) f << (i ? ", " : "") << s[i];
      f << "]}\n";
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);

  BuildOptions build;
  build.checkpoint_dir = ckpt;
  build.qformat = QuantAlgo::kFp8;
  build.kv_cache_fp8 = true;
  build.tokens_per_block = kTokensPerBlock;
  CalibrationDatasetOptions dataset;
  dataset.path = data;
  CalibrationRun run;
  run.device = CalibrationDevice::kCpu;
  run.num_threads = 1;
  auto writer = [](const BuildOptions& o) { return BuildEngine(o); };

  // One process (each rank on its own folder), then the world at tp = its size.
  build.output_dir = (root / ("one" + std::to_string(rank))).string();
  const auto one = CalibrateFromDataset(build, writer, dataset, run);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto group =
      CreateMpiCalibrationGroup(MPI_COMM_WORLD, WorldSize(), 1, CalibrationDevice::kCpu, 0);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  run.group = *group;
  build.tp_size = WorldSize();
  build.output_dir = (root / "world").string();
  const auto world = CalibrateFromDataset(build, writer, dataset, run);
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  ExpectSameAmax(**world, **one, 1e-4, "world");
  EXPECT_EQ((*world)->source, (*one)->source);
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0 removes the float engine as its call returns
  EXPECT_FALSE(fs::exists(fs::path(build.output_dir) / ".calibration_engine"));

  // A group of another size than the engine's ranks is refused by name, on every rank.
  build.tp_size = 1;
  const auto refused = CalibrateFromDataset(build, writer, dataset, run);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("but the engine is built at --tp_size 1"),
            std::string::npos)
      << refused.status().ToString();
  MPI_Barrier(MPI_COMM_WORLD);  // before rank 0 removes the checkpoint
}

}  // namespace
}  // namespace inflight::model
