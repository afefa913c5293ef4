// NcclCollectives and the CUDA runner split over GPUs, one process per GPU (mpirun -n 2 on a
// 2-GPU machine; ctest label gpu). Exits 77 (skipped) on every rank when there are fewer GPUs than
// ranks. Checks: the all-reduce (fp32, bf16) and the uneven column gather on device buffers
// against host sums; the stage hand-overs; then the CUDA runner at tp N and at pp N against the CPU
// runner's whole engine (bf16 within the CUDA runner test's bound), rank 0 answering the step;
// and pp N with micro-batches in flight, whose greedy tokens must equal tp 1's. The all-reduce over
// CUDA IPC has its own file in this binary (ipc_all_reduce_test.cc), and so does the calibration
// pass split over the GPUs (nccl_calibration_test.cc).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/cuda_model_runner.h"
#include "model/nccl_collectives.h"
#include "nccl_test_model.h"
#include "split_runner_steps.h"
#include "unit/model_cpu/test_engine.h"

namespace inflight::model {
namespace {

using testing::ExpectSplitStepMatches;
using testing::Generate;
using testing::RandomSteps;
using testing::SmallLlama;
using testing::StepLogits;
using testing::TestEngine;
using testing::WholeEngineLogits;
using testing::WholeLogits;

int WorldSize() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int WorldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Generate's share over `comm`: rank 0's token on every rank.
std::function<TokenIdType(TokenIdType)> BroadcastOver(MPI_Comm comm) {
  return [comm](TokenIdType token) {
    MPI_Bcast(&token, 1, MPI_INT32_T, 0, comm);
    return token;
  };
}

// all_reduce: "" takes INFLIGHT_ALLREDUCE (auto when unset).
std::shared_ptr<Collectives> Make(std::int32_t tp, std::int32_t pp,
                                  const std::string& all_reduce = "") {
  NcclCollectivesOptions o;
  o.timeout_seconds = 60;
  o.all_reduce = all_reduce;
  auto c = CreateNcclCollectives(MPI_COMM_WORLD, tp, pp, WorldRank(), o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

std::vector<float> Input(int rank, std::size_t n) {
  std::mt19937_64 rng(100 + static_cast<std::uint64_t>(rank));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct Stream {
  Stream() { cudaStreamCreate(&s); }
  ~Stream() { cudaStreamDestroy(s); }
  cudaStream_t s = nullptr;
};

TEST(NcclCollectivesTest, AllReduceAndUnevenGatherOnTheDevice) {
  const int n = WorldSize(), rank = WorldRank();
  auto c = Make(n, 1);
  ASSERT_NE(c, nullptr);
  Stream stream;
  constexpr std::size_t kCount = 4099;
  std::vector<float> mine = Input(rank, kCount);
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kCount * 4), cudaSuccess);
  cudaMemcpy(d, mine.data(), kCount * 4, cudaMemcpyHostToDevice);
  ASSERT_TRUE(c->AllReduceSum(d, kCount, DType::kFloat32, stream.s).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
  std::vector<float> got(kCount);
  cudaMemcpy(got.data(), d, kCount * 4, cudaMemcpyDeviceToHost);
  for (std::size_t i = 0; i < kCount; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += Input(r, kCount)[i];
    ASSERT_NEAR(got[i], want, 1e-5 * n) << "element " << i;
  }

  // Columns [r^2 * cols / n^2, (r+1)^2 * cols / n^2): uneven widths.
  constexpr std::int64_t kRows = 5, kCols = 1031;
  const std::int64_t r64 = rank, n64 = n;
  const std::int64_t b = r64 * r64 * kCols / (n64 * n64),
                     e = (r64 + 1) * (r64 + 1) * kCols / (n64 * n64);
  std::vector<float> logits(kRows * kCols, NAN);
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (std::int64_t col = b; col < e; ++col) logits[r * kCols + col] = r * 10000.0f + col;
  }
  float* dl = nullptr;
  ASSERT_EQ(cudaMalloc(&dl, logits.size() * 4), cudaSuccess);
  cudaMemcpy(dl, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice);
  const Status st = c->AllGatherColumns(dl, kRows, kCols, b, e, stream.s);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
  ASSERT_TRUE(c->CheckWait(0).ok());
  cudaMemcpy(logits.data(), dl, logits.size() * 4, cudaMemcpyDeviceToHost);
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (std::int64_t col = 0; col < kCols; ++col) {
      ASSERT_EQ(logits[r * kCols + col], r * 10000.0f + col) << "row " << r << " column " << col;
    }
  }
  cudaFree(d);
  cudaFree(dl);
}

TEST(NcclCollectivesTest, StagesHandOnAndBack) {
  const int n = WorldSize();
  auto c = Make(1, n);
  ASSERT_NE(c, nullptr);
  Stream stream;
  constexpr std::size_t kCount = 999;
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kCount * 4), cudaSuccess);
  const int p = c->pp_rank();
  std::vector<float> got(kCount);
  if (p > 0) {
    ASSERT_TRUE(c->ReceiveFromPreviousStage(d, kCount, DType::kFloat32, stream.s).ok());
    cudaStreamSynchronize(stream.s);
    cudaMemcpy(got.data(), d, kCount * 4, cudaMemcpyDeviceToHost);
    EXPECT_EQ(got, Input(p - 1, kCount));
  }
  if (p + 1 < n) {
    const std::vector<float> mine = Input(p, kCount);
    cudaMemcpy(d, mine.data(), kCount * 4, cudaMemcpyHostToDevice);
    ASSERT_TRUE(c->SendToNextStage(d, kCount, DType::kFloat32, stream.s).ok());
    cudaStreamSynchronize(stream.s);
  }
  if (p == n - 1) {
    const std::vector<float> mine = Input(50, kCount);
    cudaMemcpy(d, mine.data(), kCount * 4, cudaMemcpyHostToDevice);
    ASSERT_TRUE(c->SendToFirstStage(d, kCount, DType::kFloat32, stream.s).ok());
  } else if (p == 0) {
    ASSERT_TRUE(c->ReceiveFromLastStage(d, kCount, DType::kFloat32, stream.s).ok());
  }
  ASSERT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
  if (p == 0) {
    cudaMemcpy(got.data(), d, kCount * 4, cudaMemcpyDeviceToHost);
    EXPECT_EQ(got, Input(50, kCount));
  }
  cudaFree(d);
}

// Rank 0's engine directory (built there) on every rank.
std::string ShareDir(const std::string& dir) {
  std::string d = dir;
  int len = static_cast<int>(d.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  d.resize(static_cast<std::size_t>(len));
  MPI_Bcast(d.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return d;
}

// The CUDA runner on the engine of `o` split at tp x pp (built with `adjust`): rank 0's logits of
// each step against the same engine whole on rank 0's GPU and on the CPU runner
// (ExpectSplitStepMatches).
void ExpectSplitMatchesWhole(const std::string& name, const RandomCheckpointOptions& o,
                             const std::vector<StepInput>& steps, int tp, int pp,
                             const std::function<void(BuildOptions&)>& adjust, bool fp8) {
  const int rank = WorldRank();
  std::unique_ptr<TestEngine> whole, split;
  std::string dir, error;
  WholeEngineLogits want;
  if (rank == 0) {
    whole = TestEngine::Make(o, DType::kBFloat16, 4, &error, 1, 1, adjust);
    ASSERT_NE(whole, nullptr) << name << ": " << error;
    split = TestEngine::Make(o, DType::kBFloat16, 4, &error, tp, pp, adjust);
    ASSERT_NE(split, nullptr) << name << ": " << error;
    dir = split->engine_dir();
    want = WholeLogits(*whole, steps, 64, name);
  }
  dir = ShareDir(dir);
  CudaRunnerOptions co;
  co.max_kv_tokens = 64;
  co.device = rank;
  co.collectives = Make(tp, pp);
  ASSERT_NE(co.collectives, nullptr);
  auto runner = CreateCudaModelRunner(dir, co);
  ASSERT_TRUE(runner.ok()) << name << ": " << runner.status().ToString();
  const auto got = StepLogits(**runner, steps, name);
  if (rank == 0) {
    ASSERT_EQ(got.size(), steps.size()) << name;
    ASSERT_EQ(want.cpu.size(), steps.size()) << name;
    ASSERT_EQ(want.gpu.size(), steps.size()) << name;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      ExpectSplitStepMatches(name, i, got[i], want.gpu[i], want.cpu[i], tp, fp8);
    }
  }
  runner->reset();
  MPI_Barrier(MPI_COMM_WORLD);
}

// The CUDA runner at tp N and pp N: rank 0's logits against the whole engine's.
TEST(NcclRunnerTest, SplitEnginesMatchTheWholeEngine) {
  const int n = WorldSize();
  const RandomCheckpointOptions o = SmallLlama();
  const std::vector<StepInput> steps = RandomSteps(9, 11, {3, 0, 5, 1});
  for (const auto& [tp, pp] : {std::pair{n, 1}, std::pair{1, n}}) {
    if (o.num_heads % tp != 0 || pp > o.num_layers) continue;
    ExpectSplitMatchesWhole("tp " + std::to_string(tp) + " x pp " + std::to_string(pp), o, steps,
                            tp, pp, nullptr, false);
  }
}

// The CUDA runner on a quantized engine's pipeline stages (pp N): rank 0's logits against the whole
// quantized engine on one GPU and on the CPU runner (the same codes and scales, dequantized
// exactly). FP8 with an FP8 KV cache (each stage's file holds its own layers' KV scales) and INT8
// weight-only.
TEST(NcclRunnerTest, QuantizedStagesMatchTheWholeQuantizedEngine) {
  const int n = WorldSize();
  const RandomCheckpointOptions o = SmallLlama(5);
  if (n > o.num_layers) GTEST_SKIP() << "more ranks than layers";
  const std::vector<StepInput> steps = RandomSteps(11, 13, {2, 4, 0, 1});
  const std::pair<QuantAlgo, bool> formats[] = {{QuantAlgo::kFp8, true},
                                                {QuantAlgo::kInt8Wo, false}};
  for (const auto& [algo, kv_fp8] : formats) {
    const auto quantize = [algo = algo, kv_fp8 = kv_fp8](BuildOptions& b) {
      b.qformat = algo;
      b.kv_cache_fp8 = kv_fp8;
    };
    const std::string name = std::string(algo == QuantAlgo::kFp8 ? "fp8 + fp8 kv" : "int8_wo") +
                             " pp " + std::to_string(n);
    ExpectSplitMatchesWhole(name, o, steps, 1, n, quantize, algo == QuantAlgo::kFp8);
  }
}

// The CUDA runner at pp N with micro-batches in flight: the first stage keeps N steps in flight
// (the others one), and the greedy tokens equal tp 1's (the whole engine on rank 0's GPU, one step
// at a time) and the pipeline's own one step at a time.
TEST(NcclRunnerTest, PipelineMicroBatchesInFlightGiveTp1Tokens) {
  unsetenv("INFLIGHT_CUDA_PIPELINE_MICRO_BATCHES");  // on unless it is 0 (cuda_model_runner.cc)
  const int n = WorldSize(), rank = WorldRank();
  const RandomCheckpointOptions o = SmallLlama();
  if (n > o.num_layers) GTEST_SKIP() << n << " stages for " << o.num_layers << " layers";
  constexpr int kSeqs = 3, kNew = 6;
  std::unique_ptr<TestEngine> whole, split;
  std::string dir, error;
  std::vector<std::vector<TokenIdType>> want;
  if (rank == 0) {
    whole = TestEngine::Make(o, DType::kBFloat16, 4, &error);
    ASSERT_NE(whole, nullptr) << error;
    split = TestEngine::Make(o, DType::kBFloat16, 4, &error, 1, n);
    ASSERT_NE(split, nullptr) << error;
    dir = split->engine_dir();
    CudaRunnerOptions wo;
    wo.max_kv_tokens = 64;
    wo.device = 0;
    auto tp1 = CreateCudaModelRunner(whole->engine_dir(), wo);
    ASSERT_TRUE(tp1.ok()) << tp1.status().ToString();
    ASSERT_EQ((*tp1)->max_steps_in_flight(), 1);
    want = Generate(**tp1, 1, kSeqs, kNew, true, BroadcastOver(MPI_COMM_SELF));
    ASSERT_EQ(want.size(), static_cast<std::size_t>(kSeqs));
  }
  dir = ShareDir(dir);
  CudaRunnerOptions co;
  co.max_kv_tokens = 64;
  co.device = rank;
  co.collectives = Make(1, n);
  ASSERT_NE(co.collectives, nullptr);
  auto runner = CreateCudaModelRunner(dir, co);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  EXPECT_EQ((*runner)->max_steps_in_flight(), rank == 0 ? n : 1);
  // Every rank keeps as many launched as the first stage does (the others finish each in Launch).
  const auto in_flight = static_cast<std::size_t>(n);
  const auto share = BroadcastOver(MPI_COMM_WORLD);
  const auto pipelined = Generate(**runner, in_flight, kSeqs, kNew, rank == 0, share);
  const auto one_at_a_time = Generate(**runner, 1, kSeqs, kNew, rank == 0, share);
  if (rank == 0) {
    for (int s = 0; s < kSeqs; ++s) {
      const auto i = static_cast<std::size_t>(s);
      ASSERT_LT(i, pipelined.size());
      EXPECT_EQ(pipelined[i], want[i])
          << "sequence " << s << " with " << n << " micro-batches in flight vs tp 1";
      EXPECT_EQ(one_at_a_time[i], want[i]) << "sequence " << s << " one step at a time vs tp 1";
    }
  }
  runner->reset();
  MPI_Barrier(MPI_COMM_WORLD);
}

// The CUDA runner at tp N with decode graphs (device-sampled sequences replay captured graphs,
// whose all-reduces are then captured too): the all-reduce over CUDA IPC and NCCL's must give the
// same tokens. With two ranks both add the same two bf16 values in fp32 and round once, so the
// sums, and so the logits, agree bit for bit; with more ranks NCCL's order may differ.
TEST(NcclRunnerTest, TensorParallelGraphsGiveTheSameTokensOverIpcAndNccl) {
  const int n = WorldSize(), rank = WorldRank();
  const RandomCheckpointOptions o = SmallLlama();
  if (o.num_heads % n != 0) GTEST_SKIP() << o.num_heads << " heads over " << n << " ranks";
  constexpr int kSeqs = 3, kNew = 6;
  std::unique_ptr<TestEngine> split;
  std::string dir, error;
  if (rank == 0) {
    split = TestEngine::Make(o, DType::kBFloat16, 4, &error, n, 1);
    ASSERT_NE(split, nullptr) << error;
    dir = split->engine_dir();
  }
  dir = ShareDir(dir);
  std::vector<std::vector<std::vector<TokenIdType>>> tokens;
  for (const char* mode : {"ipc", "nccl"}) {
    CudaRunnerOptions co;
    co.max_kv_tokens = 64;
    co.device = rank;
    co.collectives = Make(n, 1, mode);
    ASSERT_NE(co.collectives, nullptr);
    auto runner = CreateCudaModelRunner(dir, co);
    ASSERT_TRUE(runner.ok()) << runner.status().ToString();
    tokens.push_back(Generate(**runner, 1, kSeqs, kNew, rank == 0, BroadcastOver(MPI_COMM_WORLD)));
    runner->reset();
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (rank == 0 && n == 2) {
    EXPECT_EQ(tokens[0], tokens[1]) << "tp " << n << ": IPC all-reduce vs NCCL";
  }
  if (rank == 0) {
    for (std::size_t s = 0; s < tokens[0].size(); ++s) {
      EXPECT_EQ(tokens[0][s].size(), static_cast<std::size_t>(kNew)) << "sequence " << s;
    }
  }
}

}  // namespace
}  // namespace inflight::model

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int devices = 0, size = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (devices < size || size < 2) {
    std::fprintf(stderr, "skipped: %d ranks need as many GPUs (and at least 2); %d visible\n", size,
                 devices);
    MPI_Finalize();
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  MPI_Finalize();
  return result;
}
