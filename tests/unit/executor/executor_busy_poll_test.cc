// ExecutorConfig::busy_poll on the CPU runner: spinning waits must deliver the same responses as
// sleeping ones, end at their timeout and at shutdown, and stop spinning once nothing is in flight
// (the iteration thread after its 20 ms window, awaitResponses at once): a spinning thread that
// never stops would hold a core of an idle server.
#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <future>
#include <thread>

#include "inflight/executor.h"
#include "unit/executor/run_requests.h"
#include "unit/executor/test_engine.h"

namespace inflight {
namespace {

using Clock = std::chrono::steady_clock;

std::string Engine() {
  static const std::string dir =
      testing::TinyEngine(testing::TinyEngineOptions(), "busy_poll_engine");
  return dir;
}

std::unique_ptr<Executor> Make(bool busy_poll) {
  ExecutorConfig cfg;
  cfg.device = DeviceKind::kCpu;
  cfg.busy_poll = busy_poll;
  auto ex = Executor::Create(Engine(), cfg);
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  return ex.ok() ? std::move(ex).value() : nullptr;
}

// CPU seconds this process has used (every thread).
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<Request> Requests() {
  const std::int64_t vocab = testing::TinyEngineOptions().vocab_size;
  std::vector<Request> reqs;
  for (std::uint32_t i = 0; i < 4; ++i) {
    reqs.push_back(testing::Greedy(testing::RandomPrompt(40 + i, 5 + 7 * i, vocab), 6 + i));
  }
  reqs[1].streaming = true;  // a streamed request's responses come one step at a time
  return reqs;
}

TEST(ExecutorBusyPollTest, SpinningWaitsGiveTheSleepingWaitsResponses) {
  auto sleeping = Make(false);
  auto spinning = Make(true);
  ASSERT_TRUE(sleeping && spinning);
  std::map<IdType, std::vector<Response>> all_sleeping;
  std::map<IdType, std::vector<Response>> all_spinning;
  const auto a = testing::RunAll(*sleeping, Requests(), &all_sleeping);
  const auto b = testing::RunAll(*spinning, Requests(), &all_spinning);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].isFinal() && !a[i].hasError()) << i;
    ASSERT_TRUE(b[i].isFinal() && !b[i].hasError()) << i;
    EXPECT_EQ(a[i].result.output_token_ids, b[i].result.output_token_ids) << "request " << i;
  }
  // The streamed request: one response a token, with either way of waiting.
  ASSERT_EQ(all_sleeping.size(), all_spinning.size());
  auto it_a = all_sleeping.begin();
  auto it_b = all_spinning.begin();
  for (; it_a != all_sleeping.end(); ++it_a, ++it_b) {
    EXPECT_EQ(it_a->second.size(), it_b->second.size()) << "request " << it_a->first;
  }
}

TEST(ExecutorBusyPollTest, AwaitWithNothingInFlightSleepsUntilItsTimeout) {
  auto ex = Make(true);
  ASSERT_TRUE(ex);
  testing::RunAll(*ex, {Requests()[0]});
  // Past the iteration thread's 20 ms window, so that only the wait below could spin.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double cpu = ProcessCpuSeconds();
  const auto start = Clock::now();
  EXPECT_TRUE(ex->awaitResponses(std::chrono::milliseconds(400)).empty());
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(waited, 0.39);
  EXPECT_LT(waited, 5.0);
  // A spinning wait would have used about 0.4 s of CPU.
  EXPECT_LT(ProcessCpuSeconds() - cpu, 0.15);
}

TEST(ExecutorBusyPollTest, IdleExecutorStopsSpinningAfterItsWindow) {
  auto ex = Make(true);
  ASSERT_TRUE(ex);
  testing::RunAll(*ex, Requests());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the 20 ms window is over
  const double cpu = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_LT(ProcessCpuSeconds() - cpu, 0.15);
  // And it still takes work after sleeping.
  const auto again = testing::RunAll(*ex, {Requests()[2]});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].isFinal() && !again[0].hasError());
}

TEST(ExecutorBusyPollTest, ShutdownEndsASpinningAwait) {
  auto ex = Make(true);
  ASSERT_TRUE(ex);
  // Enough work to be in flight when shutdown comes.
  for (std::uint32_t i = 0; i < 16; ++i) {
    Request r = Requests()[i % 4];
    r.max_tokens = 100;
    ASSERT_TRUE(ex->enqueueRequest(r).ok());
  }
  // Waits with no timeout while requests are in flight, so it spins; after shutdown every wait
  // returns at once, and an empty batch ends the loop.
  auto waiter = std::async(std::launch::async, [&] {
    std::size_t finals = 0;
    while (true) {
      const auto batch = ex->awaitResponses();
      if (batch.empty()) return finals;
      for (const auto& r : batch) finals += r.isFinal() ? 1 : 0;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ex->shutdown();
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "awaitResponses still waiting 10 s after shutdown";
  // Every request has its final response (completed, or cancelled by the shutdown): what the
  // waiter took, and what shutdown() left queued after the waiter saw the flag.
  std::size_t finals = waiter.get();
  for (const auto& r : ex->awaitResponses(std::chrono::milliseconds(0))) {
    finals += r.isFinal() ? 1 : 0;
  }
  EXPECT_EQ(finals, 16u);
}

}  // namespace
}  // namespace inflight
