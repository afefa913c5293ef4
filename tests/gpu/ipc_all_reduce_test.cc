// The all-reduce over CUDA IPC peer memory (model/ipc_all_reduce.h), one process per GPU, in the
// gpu_nccl_collectives_test binary (mpirun -n 2; main() there skips without enough GPUs). Each
// rank's input is fresh random data rounded to the dtype; the expected result is the exact fp32
// sum in rank order rounded once to the dtype, which the kernels compute bit for bit. Sizes from 1
// element to a few MB, odd ones included, every dtype, one-shot and two-shot; guard elements past
// the message must stay untouched; then replays of a captured CUDA graph with new inputs between
// them, and the collectives' AllReduceSum forced to each transport.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/ipc_all_reduce.h"
#include "model/nccl_collectives.h"
#include "unit/model_mpi/mpi_world.h"

namespace inflight::model {
namespace {

namespace kc = kernels::cuda;
using testing::mpi_world::AllRanks;
using testing::mpi_world::WorldRank;
using testing::mpi_world::WorldSize;

// Exact in bf16 and fp16 (3 x 2^12), so a guard element reads back as written in every dtype.
constexpr float kGuard = 12288.0f;
constexpr std::int64_t kGuardElems = 16;

std::uint64_t Seed() {
  static const std::uint64_t seed = [] {
    std::uint64_t s = std::random_device{}();
    MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    return s;
  }();
  return seed;
}

// What a device buffer of `dtype` holds for `v`.
float Round(DType dtype, float v) {
  if (dtype == DType::kBFloat16) return Bf16ToFloat(FloatToBf16(v));
  if (dtype == DType::kFloat16) return Fp16ToFloat(FloatToFp16(v));
  return v;
}

// Rank r's input for call `call`: uniform in [-1, 1), rounded to dtype.
std::vector<float> Input(int r, std::int64_t count, DType dtype, std::uint64_t call) {
  std::mt19937_64 rng(Seed() * 1000003 + call * 131 + static_cast<std::uint64_t>(r));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& x : v) x = Round(dtype, u(rng));
  return v;
}

std::vector<float> ExactSum(int ranks, std::int64_t count, DType dtype, std::uint64_t call) {
  std::vector<float> sum(static_cast<std::size_t>(count), 0.0f);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> in = Input(r, count, dtype, call);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += in[i];  // fp32, rank order
  }
  for (float& x : sum) x = Round(dtype, x);
  return sum;
}

// A device buffer of count + kGuardElems elements of dtype.
struct DeviceMessage {
  DeviceMessage(std::int64_t count, DType dtype) : count(count), dtype(dtype) {
    cudaMalloc(&data, static_cast<std::size_t>((count + kGuardElems) * Size()));
  }
  ~DeviceMessage() { cudaFree(data); }
  std::int64_t Size() const { return static_cast<std::int64_t>(DTypeSize(dtype)); }
  void Upload(const std::vector<float>& v) {
    std::vector<float> all(v);
    all.resize(static_cast<std::size_t>(count + kGuardElems), kGuard);
    std::vector<unsigned char> bytes(all.size() * static_cast<std::size_t>(Size()));
    ConvertFromFloat(dtype, all.data(), bytes.data(), all.size());
    cudaMemcpy(data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
    // NOTE: a copy from pageable memory may return before its DMA lands, and the kernels run on a
    // non-blocking stream that does not wait for the legacy one.
    cudaDeviceSynchronize();
  }
  std::vector<float> Download() const {
    const auto n = static_cast<std::size_t>(count + kGuardElems);
    std::vector<unsigned char> bytes(n * static_cast<std::size_t>(Size()));
    cudaMemcpy(bytes.data(), data, bytes.size(), cudaMemcpyDeviceToHost);
    std::vector<float> all(n);
    ConvertToFloat(dtype, bytes.data(), all.data(), n);
    return all;
  }
  std::int64_t count;
  DType dtype;
  void* data = nullptr;
};

// Every element equal to the exact sum, guards untouched; prints the max error beside the bound
// (0: the kernels round the same fp32 sum once). Returns the number of mismatches.
std::int64_t Check(const std::string& what, const std::vector<float>& got,
                   const std::vector<float>& want) {
  std::int64_t bad = 0;
  double max_err = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float expected = i < want.size() ? want[i] : kGuard;
    const double err = std::fabs(static_cast<double>(got[i]) - expected);
    if (!(err <= 0.0)) {
      if (bad < 5) {
        ADD_FAILURE() << what << ": element " << i << (i < want.size() ? "" : " (guard)") << " is "
                      << got[i] << ", expected " << expected << " (seed " << Seed() << ")";
      }
      ++bad;
    }
    if (err > max_err || std::isnan(err)) max_err = err;
  }
  if (bad > 0 || WorldRank() == 0) {
    std::printf("  %s: max error %g (bound 0), %lld mismatches\n", what.c_str(), max_err,
                static_cast<long long>(bad));
  }
  return bad;
}

// Whether every rank's device can reach every other's; IPC is expected to work exactly then.
bool PeersReachable() {
  int device = 0, count = 0;
  cudaGetDevice(&device);
  cudaGetDeviceCount(&count);
  bool ok = true;
  for (int d = 0; d < WorldSize() && d < count; ++d) {
    int can = 0;
    if (d != device && (cudaDeviceCanAccessPeer(&can, device, d) != cudaSuccess || can == 0)) {
      ok = false;
    }
  }
  return AllRanks(ok);
}

std::unique_ptr<IpcAllReduce> MakeIpc(std::int64_t capacity) {
  std::string why;
  auto ipc = IpcAllReduce::Create(MPI_COMM_WORLD, WorldRank(), capacity, &why);
  EXPECT_TRUE(ipc.ok()) << ipc.status().ToString();
  if (!ipc.ok()) return nullptr;
  EXPECT_NE(*ipc, nullptr) << "peer access is available, but IPC set-up said: " << why;
  return std::move(*ipc);
}

const char* Name(kc::IpcAllReduceAlgorithm a) {
  return a == kc::IpcAllReduceAlgorithm::kTwoShot ? "two-shot" : "one-shot";
}

TEST(IpcAllReduceTest, EqualsTheExactSumAtEverySize) {
  cudaSetDevice(WorldRank());
  if (!PeersReachable()) GTEST_SKIP() << "no peer access between the ranks' GPUs";
  constexpr std::int64_t kCapacity = std::int64_t{4} << 20;
  auto ipc = MakeIpc(kCapacity);
  ASSERT_NE(ipc, nullptr);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const int n = WorldSize();
  std::uint64_t call = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    const std::int64_t largest = kCapacity / static_cast<std::int64_t>(DTypeSize(dtype)) - 1;
    for (std::int64_t count :
         {std::int64_t{1}, std::int64_t{3}, std::int64_t{8}, std::int64_t{9}, std::int64_t{1023},
          std::int64_t{4099}, std::int64_t{65537}, std::int64_t{262143}, largest}) {
      for (auto algorithm :
           {kc::IpcAllReduceAlgorithm::kOneShot, kc::IpcAllReduceAlgorithm::kTwoShot}) {
        ++call;
        DeviceMessage m(count, dtype);
        m.Upload(Input(WorldRank(), count, dtype, call));
        const Status st = ipc->Run(m.data, count, dtype, algorithm, stream);
        ASSERT_TRUE(st.ok()) << st.ToString();
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        const std::string what =
            std::string(Name(algorithm)) + " " + DTypeName(dtype) + " x " + std::to_string(count);
        EXPECT_EQ(Check(what, m.Download(), ExactSum(n, count, dtype, call)), 0) << what;
      }
    }
  }
  // Too large for the buffers, or misaligned: refused, nothing queued.
  DeviceMessage big(kCapacity / 2 + 1, DType::kBFloat16);
  EXPECT_FALSE(ipc->Run(big.data, kCapacity / 2 + 1, DType::kBFloat16,
                        kc::IpcAllReduceAlgorithm::kOneShot, stream)
                   .ok());
  EXPECT_FALSE(ipc->Run(static_cast<char*>(big.data) + 2, 100, DType::kBFloat16,
                        kc::IpcAllReduceAlgorithm::kOneShot, stream)
                   .ok());
  cudaStreamDestroy(stream);
  MPI_Barrier(MPI_COMM_WORLD);
}

// A captured graph of a one-shot and a two-shot call, replayed with new inputs each time, with
// eager calls of other sizes (other grid sizes) in between: the barrier values and the buffer
// parity live in device memory, so every replay must still meet its peers and sum.
TEST(IpcAllReduceTest, CapturedGraphReplays) {
  cudaSetDevice(WorldRank());
  if (!PeersReachable()) GTEST_SKIP() << "no peer access between the ranks' GPUs";
  auto ipc = MakeIpc(std::int64_t{1} << 20);
  ASSERT_NE(ipc, nullptr);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const int n = WorldSize(), rank = WorldRank();
  constexpr std::int64_t kA = 5120, kB = 77777, kEager = 300001;  // bf16, bf16, fp16
  DeviceMessage a(kA, DType::kBFloat16), b(kB, DType::kBFloat16), e(kEager, DType::kFloat16);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status sa =
      ipc->Run(a.data, kA, DType::kBFloat16, kc::IpcAllReduceAlgorithm::kOneShot, stream);
  const Status sb =
      ipc->Run(b.data, kB, DType::kBFloat16, kc::IpcAllReduceAlgorithm::kTwoShot, stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(sa.ok() && sb.ok()) << sa.ToString() << " " << sb.ToString();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (std::uint64_t replay = 0; replay < 6; ++replay) {
    const std::uint64_t call = 5000 + 3 * replay;
    a.Upload(Input(rank, kA, DType::kBFloat16, call));
    b.Upload(Input(rank, kB, DType::kBFloat16, call + 1));
    e.Upload(Input(rank, kEager, DType::kFloat16, call + 2));
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    if (replay % 2 == 1) {
      ASSERT_TRUE(
          ipc->Run(e.data, kEager, DType::kFloat16, kc::IpcAllReduceAlgorithm::kOneShot, stream)
              .ok());
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::string r = " replay " + std::to_string(replay);
    EXPECT_EQ(Check("graph one-shot" + r, a.Download(), ExactSum(n, kA, DType::kBFloat16, call)),
              0);
    EXPECT_EQ(
        Check("graph two-shot" + r, b.Download(), ExactSum(n, kB, DType::kBFloat16, call + 1)), 0);
    if (replay % 2 == 1) {
      EXPECT_EQ(Check("eager" + r, e.Download(), ExactSum(n, kEager, DType::kFloat16, call + 2)),
                0);
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  MPI_Barrier(MPI_COMM_WORLD);
}

// NcclCollectives::AllReduceSum with each INFLIGHT_ALLREDUCE value: the same sums whichever
// transport runs (NCCL may add in another order: within one rounding of the dtype), a misaligned
// buffer included (IPC needs 16-byte alignment: NCCL takes it).
TEST(IpcAllReduceTest, CollectivesSumWithEveryTransport) {
  const int n = WorldSize(), rank = WorldRank();
  for (const char* mode : {"nccl", "auto", "ipc", "ipc_oneshot", "ipc_twoshot"}) {
    NcclCollectivesOptions o;
    o.timeout_seconds = 60;
    o.all_reduce = mode;
    o.ipc_capacity_bytes = std::int64_t{1} << 20;
    auto c = CreateNcclCollectives(MPI_COMM_WORLD, n, 1, rank, o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    std::uint64_t call = 9000;
    for (std::int64_t count : {std::int64_t{7}, std::int64_t{4096}, std::int64_t{300000},
                               std::int64_t{700000}}) {  // the last is past the IPC capacity
      for (std::int64_t offset : {std::int64_t{0}, std::int64_t{1}}) {
        ++call;
        DeviceMessage m(count + offset, DType::kBFloat16);
        std::vector<float> in = Input(rank, count + offset, DType::kBFloat16, call);
        m.Upload(in);
        void* at = static_cast<char*>(m.data) + offset * 2;
        const Status st = (*c)->AllReduceSum(at, count, DType::kBFloat16, stream);
        ASSERT_TRUE(st.ok()) << mode << ": " << st.ToString();
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        const std::vector<float> got = m.Download();
        const std::vector<float> want = ExactSum(n, count + offset, DType::kBFloat16, call);
        double max_err = 0;
        for (std::int64_t i = offset; i < count + offset; ++i) {
          const auto k = static_cast<std::size_t>(i);
          max_err = std::max(max_err, std::fabs(static_cast<double>(got[k]) - want[k]) /
                                          std::max(1.0f, std::fabs(want[k])));
        }
        if (offset == 1) {
          EXPECT_EQ(got[0], in[0]) << mode << ": the element before the message";
        }
        EXPECT_LE(max_err, 1.0 / 128) << mode << " count " << count << " offset " << offset
                                      << " (bf16: one rounding; seed " << Seed() << ")";
      }
    }
    cudaStreamDestroy(stream);
    c->reset();
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST(IpcAllReduceTest, RefusesAnUnknownTransport) {
  NcclCollectivesOptions o;
  o.all_reduce = "shm";
  auto c = CreateNcclCollectives(MPI_COMM_WORLD, WorldSize(), 1, WorldRank(), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "all_reduce \"shm\" is not one of: auto, nccl, ipc, ipc_oneshot, ipc_twoshot");
}

}  // namespace
}  // namespace inflight::model
