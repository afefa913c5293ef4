// MpiCollectives on random data, at every tp x pp layout of the world (mpirun -n 2, 4, 8): the
// all-reduce against the sum of the stage's ranks (fp32, and fp16 / bf16 summed in fp32), the
// column gather with uneven ranges (some empty), the hand-overs between stages and back to the
// first, and the errors: a communicator of the wrong size, ranges that do not partition the
// columns, a message of the wrong length, a CUDA stream, a peer that never answers.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "model/mpi_collectives.h"
#include "mpi_world.h"

namespace inflight::model {
namespace {

using inflight::testing::mpi_world::WorldRank;
using inflight::testing::mpi_world::WorldSize;

struct Layout {
  std::int32_t tp, pp;
};
std::string Name(const Layout& l) {
  return "tp " + std::to_string(l.tp) + " x pp " + std::to_string(l.pp);
}

// Every way to split the world: tp n, pp n, and the mixed ones.
std::vector<Layout> Layouts() {
  std::vector<Layout> out;
  const int n = WorldSize();
  for (int tp = n; tp >= 1; --tp) {
    if (n % tp == 0) out.push_back({tp, n / tp});
  }
  return out;
}

std::shared_ptr<Collectives> Make(const Layout& l, double timeout_seconds = 60) {
  MpiCollectivesOptions o;
  o.timeout_seconds = timeout_seconds;
  auto c = CreateMpiCollectives(MPI_COMM_WORLD, l.tp, l.pp, o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

// Rank `world_rank`'s input of `count` values in [-2, 2): every rank can make every rank's.
std::vector<float> Input(int world_rank, std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 1000 + static_cast<std::uint64_t>(world_rank));
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& x : v) x = u(rng);
  return v;
}

// Whether every rank in `members` (world ranks) holds the same bytes as `mine`.
bool SameOnRanks(const std::vector<float>& mine, const std::vector<int>& members) {
  const int n = WorldSize();
  std::vector<float> all(mine.size() * static_cast<std::size_t>(n));
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(),
                static_cast<int>(mine.size()), MPI_FLOAT, MPI_COMM_WORLD);
  for (const int r : members) {
    if (std::memcmp(all.data() + r * mine.size(), mine.data(), mine.size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

TEST(MpiCollectivesTest, RanksFollowTensorRtLlmOrder) {
  const int rank = WorldRank();
  for (const Layout& l : Layouts()) {
    auto c = Make(l);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->tp_size(), l.tp);
    EXPECT_EQ(c->pp_size(), l.pp);
    EXPECT_EQ(c->tp_rank(), rank % l.tp) << Name(l);
    EXPECT_EQ(c->pp_rank(), rank / l.tp) << Name(l);
  }
}

TEST(MpiCollectivesTest, AllReduceSumsTheStagesRanksInFp32) {
  const int rank = WorldRank();
  constexpr std::int64_t kCount = 1031;
  for (const Layout& l : Layouts()) {
    auto c = Make(l);
    ASSERT_NE(c, nullptr);
    const int stage0 = c->pp_rank() * l.tp;  // world rank of this stage's tp rank 0
    std::vector<int> stage;
    for (int t = 0; t < l.tp; ++t) stage.push_back(stage0 + t);

    std::vector<float> buffer = Input(rank, kCount, 1);
    ASSERT_TRUE(c->AllReduceSum(buffer.data(), kCount, DType::kFloat32, nullptr).ok());
    std::vector<double> want(kCount, 0.0);
    for (const int r : stage) {
      const std::vector<float> in = Input(r, kCount, 1);
      for (std::int64_t i = 0; i < kCount; ++i) want[i] += in[i];
    }
    for (std::int64_t i = 0; i < kCount; ++i) {
      ASSERT_NEAR(buffer[i], want[i], 1e-5 * l.tp) << Name(l) << " element " << i;
    }
    // The ranks of a stage go on from the same hidden state: the sums must be bitwise equal.
    EXPECT_TRUE(SameOnRanks(buffer, stage)) << Name(l);

    for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      const std::vector<float> mine = Input(rank, kCount, 2);
      std::vector<std::uint16_t> half(kCount);
      ConvertFromFloat(dtype, mine.data(), half.data(), half.size());
      ASSERT_TRUE(c->AllReduceSum(half.data(), kCount, dtype, nullptr).ok()) << DTypeName(dtype);
      std::vector<float> got(kCount);
      ConvertToFloat(dtype, half.data(), got.data(), got.size());
      // Expected: each rank's input rounded to the dtype, summed exactly, rounded once.
      std::vector<float> sum(kCount, 0.0f);
      for (std::int64_t i = 0; i < kCount; ++i) {
        double s = 0;
        for (const int r : stage) {
          const float x = Input(r, kCount, 2)[i];
          std::uint16_t h;
          ConvertFromFloat(dtype, &x, &h, 1);
          float back;
          ConvertToFloat(dtype, &h, &back, 1);
          s += back;
        }
        sum[i] = static_cast<float>(s);
      }
      std::vector<std::uint16_t> rounded(kCount);
      ConvertFromFloat(dtype, sum.data(), rounded.data(), rounded.size());
      std::int64_t mismatches = 0;
      for (std::int64_t i = 0; i < kCount; ++i) mismatches += rounded[i] != half[i];
      // NOTE: the fp32 sum of at most 8 inputs is exact but for inputs that differ by more than
      // 2^13 in magnitude; those are rare, and differ by one unit of the dtype then.
      EXPECT_LE(mismatches, kCount / 100) << Name(l) << " " << DTypeName(dtype);
      for (std::int64_t i = 0; i < kCount; ++i) {
        float want_f;
        ConvertToFloat(dtype, &rounded[i], &want_f, 1);
        const float unit = dtype == DType::kFloat16 ? 1.0f / 1024 : 1.0f / 128;
        ASSERT_LE(std::fabs(got[i] - want_f), unit * std::fabs(want_f) + 1e-6f)
            << Name(l) << " " << DTypeName(dtype) << " element " << i;
      }
    }
  }
}

TEST(MpiCollectivesTest, AllGatherColumnsPlacesUnevenRanges) {
  constexpr std::int64_t kRows = 3, kCols = 301;
  auto value = [](std::int64_t r, std::int64_t col) { return static_cast<float>(r * 1000 + col); };
  for (const Layout& l : Layouts()) {
    auto c = Make(l);
    ASSERT_NE(c, nullptr);
    // Quadratic boundaries: widths grow with the rank, and rank 0's is empty from tp 18 on; at
    // every tp, some widths differ.
    auto boundary = [&](std::int64_t t) { return t * t * kCols / (l.tp * l.tp); };
    for (const bool vocab_split : {true, false}) {
      const std::int64_t t = c->tp_rank();
      const std::int64_t b = vocab_split ? t * kCols / l.tp : boundary(t);
      const std::int64_t e = vocab_split ? (t + 1) * kCols / l.tp : boundary(t + 1);
      std::vector<float> logits(kRows * kCols, std::numeric_limits<float>::quiet_NaN());
      for (std::int64_t r = 0; r < kRows; ++r) {
        for (std::int64_t col = b; col < e; ++col) logits[r * kCols + col] = value(r, col);
      }
      const Status st = c->AllGatherColumns(logits.data(), kRows, kCols, b, e, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (std::int64_t r = 0; r < kRows; ++r) {
        for (std::int64_t col = 0; col < kCols; ++col) {
          ASSERT_EQ(logits[r * kCols + col], value(r, col))
              << Name(l) << " row " << r << " column " << col << " (own range [" << b << ", " << e
              << "))";
        }
      }
    }
  }
}

TEST(MpiCollectivesTest, AllGatherColumnsRefusesRangesThatDoNotPartition) {
  const Layout l{WorldSize(), 1};
  auto c = Make(l);
  ASSERT_NE(c, nullptr);
  // Every rank claims the first 10 columns: rank 1's range starts where rank 0's does.
  std::vector<float> logits(2 * 40, 0.0f);
  const Status st = c->AllGatherColumns(logits.data(), 2, 40, 0, 10, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tp_rank 1 has [0, 10) where column 10 was due"), std::string::npos)
      << st.message();
}

TEST(MpiCollectivesTest, StagesHandActivationsOnAndResultsBack) {
  constexpr std::int64_t kCount = 777;
  for (const Layout& l : Layouts()) {
    if (l.pp == 1) continue;
    auto c = Make(l);
    ASSERT_NE(c, nullptr);
    const std::int32_t p = c->pp_rank(), t = c->tp_rank();
    auto message = [&](std::int32_t stage, int kind) {
      return Input(stage * 100 + t, kCount, 3 + static_cast<std::uint64_t>(kind));
    };
    // In pipeline order: receive the previous stage's, then send on.
    if (p > 0) {
      std::vector<float> got(kCount, 0.0f);
      const Status st = c->ReceiveFromPreviousStage(got.data(), kCount, DType::kFloat32, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(got, message(p - 1, 0)) << Name(l) << " stage " << p;
    }
    if (p + 1 < l.pp) {
      const std::vector<float> mine = message(p, 0);
      ASSERT_TRUE(c->SendToNextStage(mine.data(), kCount, DType::kFloat32, nullptr).ok());
    }
    // bf16 counts elements of 2 bytes: the last stage hands back half a float buffer.
    if (p == l.pp - 1) {
      const std::vector<float> mine = message(p, 1);
      ASSERT_TRUE(c->SendToFirstStage(mine.data(), kCount, DType::kBFloat16, nullptr).ok());
    } else if (p == 0) {
      std::vector<float> got(kCount, 0.0f);
      const Status st = c->ReceiveFromLastStage(got.data(), kCount, DType::kBFloat16, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      const std::vector<float> want = message(l.pp - 1, 1);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), kCount * 2), 0) << Name(l);
      EXPECT_EQ(got[kCount / 2 + 1], 0.0f) << "wrote past kCount bf16 elements";
    }
    // Only the ends of a pipeline send results; only stage 0 receives them.
    if (p != l.pp - 1) {
      float x = 0;
      EXPECT_EQ(c->SendToFirstStage(&x, 1, DType::kFloat32, nullptr).code(),
                StatusCode::kInvalidArgument);
    }
  }
}

TEST(MpiCollectivesTest, ReceiveOfTheWrongLengthFails) {
  const Layout l{1, WorldSize()};
  auto c = Make(l);
  ASSERT_NE(c, nullptr);
  std::vector<float> buffer(12, 1.0f);
  if (c->pp_rank() == 0) {
    ASSERT_TRUE(c->SendToNextStage(buffer.data(), 10, DType::kFloat32, nullptr).ok());
  } else if (c->pp_rank() == 1) {
    const Status st = c->ReceiveFromPreviousStage(buffer.data(), 12, DType::kFloat32, nullptr);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("received 40 bytes from pp_rank 0, expected 48"), std::string::npos)
        << st.message();
  }
}

TEST(MpiCollectivesTest, RefusesACommunicatorOfAnotherSize) {
  const int n = WorldSize();
  auto c = CreateMpiCollectives(MPI_COMM_WORLD, n, 2);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  const std::string want = "has " + std::to_string(n) + " ranks, but tp_size " + std::to_string(n) +
                           " x pp_size 2 needs " + std::to_string(2 * n);
  EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message();
  auto self = CreateMpiCollectives(MPI_COMM_SELF, 1, 2);
  ASSERT_FALSE(self.ok());
  EXPECT_NE(self.status().message().find("has 1 ranks, but tp_size 1 x pp_size 2 needs 2"),
            std::string::npos)
      << self.status().message();
  // One process is a group of one.
  auto one = CreateMpiCollectives(MPI_COMM_SELF, 1, 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  float x = 3.0f;
  ASSERT_TRUE((*one)->AllReduceSum(&x, 1, DType::kFloat32, nullptr).ok());
  EXPECT_EQ(x, 3.0f);
}

TEST(MpiCollectivesTest, RefusesACudaStreamAndOtherDtypes) {
  auto c = Make({WorldSize(), 1});
  ASSERT_NE(c, nullptr);
  float x = 1.0f;
  int fake_stream = 0;
  const Status st = c->AllReduceSum(&x, 1, DType::kFloat32, &fake_stream);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("take no CUDA stream"), std::string::npos) << st.message();
  std::int32_t i = 1;
  const Status ints = c->AllReduceSum(&i, 1, DType::kInt32, nullptr);
  EXPECT_NE(ints.message().find("dtype int32 is not one of: float32, float16, bfloat16"),
            std::string::npos)
      << ints.message();
}

// A peer that never answers: the wait ends at the timeout with kUnavailable, and the group refuses
// every later operation. (The late peer then answers, so that nothing is left pending at exit.)
TEST(MpiCollectivesTest, APeerThatNeverAnswersTimesOut) {
  const Layout l{1, WorldSize()};
  auto c = Make(l, /*timeout_seconds=*/0.5);
  ASSERT_NE(c, nullptr);
  float x = 0.0f;
  const bool first = c->pp_rank() == 0, last = c->pp_rank() == l.pp - 1;
  if (first) {
    const auto start = std::chrono::steady_clock::now();
    const Status st = c->ReceiveFromLastStage(&x, 1, DType::kFloat32, nullptr);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
    EXPECT_NE(st.message().find("ReceiveFromLastStage waited more than"), std::string::npos)
        << st.message();
    EXPECT_GE(waited, 0.5);
    const Status later = c->AllReduceSum(&x, 1, DType::kFloat32, nullptr);
    EXPECT_EQ(later.code(), StatusCode::kUnavailable) << later.ToString();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (last) {
    ASSERT_TRUE(c->SendToFirstStage(&x, 1, DType::kFloat32, nullptr).ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace inflight::model
