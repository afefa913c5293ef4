// The calibration pass split over GPUs, one process each (model/fp8_calibration_mpi.h with NCCL;
// part of gpu_nccl_collectives_test, mpirun -n 2): every rank runs the same samples through its
// rank of the bf16 float engine at tp N and at pp N, and the group's fold must give every rank the
// amax of the whole engine on one GPU at every point of every layer, within bf16 rounding of the
// activations that lead there (the CUDA and CPU passes agree within 4% in
// gpu_cuda_quant_runner_test; the same bound here).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "model/fp8_calibration_mpi.h"
#include "nccl_test_model.h"
#include "unit/model_cpu/test_engine.h"
#include "unit/model_mpi/mpi_world.h"

namespace inflight::model {
namespace {

using inflight::testing::mpi_world::ShareString;
using inflight::testing::mpi_world::WorldRank;
using inflight::testing::mpi_world::WorldSize;
using testing::SmallLlama;
using testing::TestEngine;

TEST(NcclCalibrationTest, SplitPassOnGpusFoldsToOneGpusAmax) {
  const int n = WorldSize(), rank = WorldRank();
  const RandomCheckpointOptions o = SmallLlama(37);
  std::mt19937_64 rng(41);
  std::vector<VecTokens> samples;
  for (int len : {19, 6, 13, 9}) {
    VecTokens s;
    for (int i = 0; i < len; ++i) s.push_back(static_cast<TokenIdType>(rng() % 1031));
    samples.push_back(std::move(s));
  }
  CalibrationRun run;
  run.device = CalibrationDevice::kCuda;

  std::unique_ptr<TestEngine> whole;
  std::string error;
  if (rank == 0) {
    whole = TestEngine::Make(o, DType::kBFloat16, 4, &error);
    EXPECT_NE(whole, nullptr) << error;
  }
  const std::string whole_dir = ShareString(whole != nullptr ? whole->engine_dir() : "");
  ASSERT_FALSE(whole_dir.empty());
  Result<ActivationAmax> reference = ActivationAmax{};  // rank 0 compares
  if (rank == 0) reference = ObserveActivationAmax(whole_dir, samples, run);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();

  for (const auto& [tp, pp] : {std::pair{n, 1}, std::pair{1, n}}) {
    if (o.num_heads % tp != 0 || pp > o.num_layers) continue;
    const std::string name = "tp " + std::to_string(tp) + " x pp " + std::to_string(pp);
    std::unique_ptr<TestEngine> split;
    if (rank == 0) {
      split = TestEngine::Make(o, DType::kBFloat16, 4, &error, tp, pp);
      EXPECT_NE(split, nullptr) << error;
    }
    const std::string dir = ShareString(split != nullptr ? split->engine_dir() : "");
    ASSERT_FALSE(dir.empty()) << name;
    auto group = CreateMpiCalibrationGroup(MPI_COMM_WORLD, tp, pp, CalibrationDevice::kCuda, rank);
    ASSERT_TRUE(group.ok()) << name << ": " << group.status().ToString();
    CalibrationRun split_run = run;
    split_run.group = *group;
    const Result<ActivationAmax> amax = ObserveActivationAmax(dir, samples, split_run);
    ASSERT_TRUE(amax.ok()) << name << ": " << amax.status().ToString();
    if (rank == 0) {
      ASSERT_EQ(amax->layers.size(), reference->layers.size()) << name;
      for (std::size_t l = 0; l < amax->layers.size(); ++l) {
        for (int p = 0; p < kNumAmaxPoints; ++p) {
          const float want = reference->layers[l][static_cast<std::size_t>(p)];
          const float got = amax->layers[l][static_cast<std::size_t>(p)];
          EXPECT_GT(want, 0.0f) << name << " layer " << l << " point " << p;
          EXPECT_NEAR(got, want, 0.04f * want) << name << " layer " << l << " point " << p;
        }
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

}  // namespace
}  // namespace inflight::model
