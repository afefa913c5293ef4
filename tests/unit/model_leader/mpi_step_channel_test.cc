// The MPI side of leader mode, run under mpirun with 3 ranks (ctest label mpi): the step broadcast
// delivers every message whole (frame-sized, larger and empty ones), the leader's send gives up
// within its limit when the followers take nothing, and the load report tells rank 0 which rank
// failed and the group's smallest KV pool. Every rank runs every test; a failure on any rank fails
// the job.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "model/mpi_load_report.h"
#include "model/mpi_process.h"
#include "model/mpi_step_channel.h"

namespace inflight::model {
namespace {

int Rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int Size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

MPI_Comm Dup() {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  return comm;
}

// Bytes that differ between messages and positions, so a shifted or stale byte is seen.
std::string Pattern(std::size_t size, int seed) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i)
    s[i] = static_cast<char>((i * 131 + static_cast<std::size_t>(seed) * 7 + i / 251) & 0xff);
  return s;
}

// Whether every rank passed `ok` (so that all ranks agree on a test's verdict).
bool Everywhere(bool ok) {
  int mine = ok ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

TEST(MpiStepChannelTest, DeliversMessagesOfEverySize) {
  MpiStepChannel channel(Dup(), std::chrono::milliseconds(60'000));
  const std::size_t frame = MpiStepChannel::kFrameBytes - 8;  // what fits beside the size
  const std::size_t sizes[] = {0, 1, 19, frame - 1, frame, frame + 1, 99'989, 3'000'000};
  bool ok = true;
  int seed = 0;
  for (std::size_t size : sizes) {
    const std::string message = Pattern(size, ++seed);
    if (Rank() == 0) {
      Status st = channel.Send(message);
      EXPECT_TRUE(st.ok()) << "size " << size << ": " << st.ToString();
      ok = ok && st.ok();
    } else {
      Result<std::string> got = channel.Receive();
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(got->size(), size);
      EXPECT_TRUE(*got == message)
          << "rank " << Rank() << ": message of " << size << " bytes arrived changed";
      ok = ok && *got == message;
    }
  }
  EXPECT_TRUE(Everywhere(ok));
}

TEST(MpiStepChannelTest, LeaderGivesUpWhenFollowersTakeNothing) {
  // A large message cannot leave the leader before the followers post their side (MPI's eager
  // limit is far below it), so with the followers away the send must time out, not hang.
  auto channel = std::make_unique<MpiStepChannel>(Dup(), std::chrono::milliseconds(300));
  const std::string message = Pattern(8 << 20, 3);
  bool ok = true;
  if (Rank() == 0) {
    const auto start = std::chrono::steady_clock::now();
    Status st = channel->Send(message);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
    EXPECT_NE(st.message().find("did not complete within 300 ms"), std::string::npos)
        << st.message();
    EXPECT_LT(seconds, 20.0);
    Status again = channel->Send("x");
    EXPECT_FALSE(again.ok()) << "a channel whose broadcast timed out must stay failed";
    ok = st.code() == StatusCode::kUnavailable && !again.ok();
  }
  // The followers take the message late, which lets the leader's broadcast finish inside MPI.
  MPI_Barrier(MPI_COMM_WORLD);
  if (Rank() != 0) {
    Result<std::string> got = channel->Receive();
    ok = got.ok() && *got == message;
    EXPECT_TRUE(ok);
  }
  EXPECT_TRUE(Everywhere(ok));
}

// The leader of a GPU group posts a step and then runs it with NCCL, making no MPI call until the
// step is done; the followers must get the step meanwhile, or the group deadlocks. The leader here
// posts a message of `size` bytes and sleeps 4 s without MPI calls; every follower must have the
// message well before it wakes.
void ExpectFollowersGetAStepWhileTheLeaderMakesNoMpiCall(std::size_t size, int seed) {
  MpiStepChannel channel(Dup(), std::chrono::milliseconds(60'000));
  const std::string message = Pattern(size, seed);
  MPI_Barrier(MPI_COMM_WORLD);
  bool ok = true;
  if (Rank() == 0) {
    Status st = channel.Post(message);
    EXPECT_TRUE(st.ok()) << st.ToString();
    std::this_thread::sleep_for(std::chrono::seconds(4));
    ok = st.ok() && channel.Send("").ok();  // completes whatever is still posted
  } else {
    const auto start = std::chrono::steady_clock::now();
    Result<std::string> got = channel.Receive();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(*got == message);
    EXPECT_LT(seconds, 3.0) << "a step of " << size
                            << " bytes arrived only once the leader called MPI again";
    Result<std::string> empty = channel.Receive();
    ok = *got == message && seconds < 3.0 && empty.ok() && empty->empty();
  }
  EXPECT_TRUE(Everywhere(ok));
}

// A frame-sized step: it deadlocked on 2 GPUs with a 4096-byte frame, which Open MPI's
// shared-memory transport sends by rendezvous.
TEST(MpiStepChannelTest, FollowersGetAFrameWhileTheLeaderMakesNoMpiCall) {
  ExpectFollowersGetAStepWhileTheLeaderMakesNoMpiCall(MpiStepChannel::kFrameBytes - 8, 11);
}

// A step longer than the frame (a burst of new requests' prompts), whose rest goes by rendezvous:
// the leader posted it and went on to run it, blocking in a device wait while the device waited in
// a collective for the followers, who waited for the rest. Two GPUs hung at the first burst of
// 1,000 requests.
TEST(MpiStepChannelTest, FollowersGetALongStepWhileTheLeaderMakesNoMpiCall) {
  ExpectFollowersGetAStepWhileTheLeaderMakesNoMpiCall(300'007, 13);
}

TEST(MpiLoadReportTest, RankZeroLearnsTheSmallestPoolWhenAllLoaded) {
  const std::int64_t mine = 100 + 10 * (Size() - Rank());  // the last rank has the smallest
  Result<std::int64_t> got = GatherLoadResults(MPI_COMM_WORLD, mine);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, Rank() == 0 ? 110 : mine);
}

TEST(MpiLoadReportTest, RankZeroLearnsWhichRankFailedAndWhy) {
  const int failing = Size() - 1;
  Result<std::int64_t> mine = Rank() == failing
                                  ? Result<std::int64_t>(NotFound("rank1.safetensors is missing"))
                                  : Result<std::int64_t>(std::int64_t{64});
  Result<std::int64_t> got = GatherLoadResults(MPI_COMM_WORLD, mine);
  if (Rank() == 0) {
    ASSERT_FALSE(got.ok());
    const std::string expected = "rank " + std::to_string(failing) + " of " +
                                 std::to_string(Size()) + " could not load its part of the engine";
    EXPECT_NE(got.status().message().find(expected), std::string::npos) << got.status().message();
    EXPECT_NE(got.status().message().find("rank1.safetensors is missing"), std::string::npos)
        << got.status().message();
  } else if (Rank() == failing) {
    EXPECT_FALSE(got.ok());
  } else {
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, 64);
  }
}

}  // namespace
}  // namespace inflight::model

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (inflight::Status st = inflight::model::EnsureMpiInitialized(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  if (inflight::model::Size() < 2) {
    std::fprintf(stderr, "run under mpirun with at least 2 ranks\n");
    return 1;
  }
  // Only rank 0 prints gtest's report; every rank's failures still set its exit status.
  if (inflight::model::Rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
