// The scheduler in a simulated executor loop over a fake paged model (sim_harness.h): whatever the
// pool size, policy, chunking or reuse, every request finishes with the tokens the model gives
// without any scheduling, and every block comes back.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "sim_harness.h"

namespace inflight::executor::sim {
namespace {

// Requests with shared prefixes and repeated prompts (for reuse), long prompts (for chunking),
// staggered arrivals.
std::vector<SimRequest> Workload(std::uint32_t seed, int num_requests, int max_prompt) {
  std::mt19937 rng(seed);
  VecTokens system_prompt;
  for (int i = 0; i < 12; ++i) system_prompt.push_back(static_cast<TokenIdType>(rng() % kVocab));
  std::vector<SimRequest> out;
  for (int i = 0; i < num_requests; ++i) {
    SimRequest r;
    if (!out.empty() && rng() % 4 == 0) {
      r.prompt = out[rng() % out.size()].prompt;  // the same question again
    } else {
      if (rng() % 2 == 0) r.prompt = system_prompt;
      const int extra = 1 + static_cast<int>(rng() % static_cast<std::uint32_t>(max_prompt - 12));
      for (int j = 0; j < extra; ++j) r.prompt.push_back(static_cast<TokenIdType>(rng() % kVocab));
    }
    r.max_new_tokens = 1 + static_cast<SizeType>(rng() % 12);
    r.arrival_step = static_cast<int>(rng() % 20);
    if (rng() % 3 == 0) r.end_id = 3;
    out.push_back(std::move(r));
  }
  return out;
}

SimSetup MakeSetup(CapacitySchedulerPolicy policy, bool chunked, SchedulerLimits limits,
                   std::int64_t blocks, bool reuse,
                   BatchingType batching = BatchingType::kInflight) {
  SimSetup s;
  s.config.policy = policy;
  s.config.enable_chunked_context = chunked;
  s.limits = limits;
  s.num_blocks = blocks;
  s.enable_reuse = reuse;
  s.batching = batching;
  return s;
}

std::string Describe(const SimSetup& s) {
  return std::string(s.config.policy == CapacitySchedulerPolicy::kMaxUtilization
                         ? "max_utilization"
                         : "guaranteed_no_evict") +
         (s.config.enable_chunked_context ? " chunked" : "") + (s.enable_reuse ? " reuse" : "") +
         (s.batching == BatchingType::kStatic ? " static" : "") +
         " blocks=" + std::to_string(s.num_blocks) +
         " max_num_tokens=" + std::to_string(s.limits.max_num_tokens);
}

constexpr auto kNoEvict = CapacitySchedulerPolicy::kGuaranteedNoEvict;
constexpr auto kMaxUtil = CapacitySchedulerPolicy::kMaxUtilization;

TEST(SchedulerSimTest, TinyPoolsGiveTheSameTokensAsAnUnconstrainedOne) {
  const std::vector<SimRequest> requests = Workload(7, 24, 30);
  std::vector<VecTokens> expected;
  for (const SimRequest& r : requests)
    expected.push_back(ReferenceGenerate(r.prompt, r.max_new_tokens, r.end_id));

  const SimOutcome big = RunSim(MakeSetup(kNoEvict, false, {8, 64, 64, 4}, 256, false), requests);
  ASSERT_EQ(big.generated, expected);
  EXPECT_EQ(big.num_pauses, 0);

  // 12 blocks of 4 tokens: a request needs at most 42 tokens (11 blocks), so a few run at once.
  std::int64_t total_pauses = 0;
  for (bool reuse : {false, true}) {
    for (const SimSetup& setup :
         {MakeSetup(kMaxUtil, true, {6, 16, 64, 4}, 12, reuse),
          MakeSetup(kMaxUtil, false, {6, 32, 64, 4}, 12, reuse),
          MakeSetup(kNoEvict, true, {6, 16, 64, 4}, 12, reuse),
          MakeSetup(kNoEvict, false, {6, 32, 64, 4}, 12, reuse),
          MakeSetup(kMaxUtil, true, {3, 8, 64, 4}, 12, reuse, BatchingType::kStatic),
          MakeSetup(kMaxUtil, true, {6, 5, 64, 4}, 12, reuse)}) {
      SCOPED_TRACE(Describe(setup));
      const SimOutcome out = RunSim(setup, requests);
      EXPECT_EQ(out.generated, big.generated);
      EXPECT_EQ(out.free_blocks_at_end, setup.num_blocks);
      if (setup.config.policy == kNoEvict) {
        EXPECT_EQ(out.num_pauses, 0);
        if (!reuse) {
          EXPECT_LE(out.max_promised_blocks, setup.num_blocks);
        }
      }
      total_pauses += out.num_pauses;
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(total_pauses, 0) << "the tiny pools should force max_utilization to pause";
}

TEST(SchedulerSimTest, SeveralSeedsUnderPressure) {
  for (std::uint32_t seed = 100; seed < 106; ++seed) {
    const std::vector<SimRequest> requests = Workload(seed, 16, 24);
    for (const SimSetup& setup : {MakeSetup(kMaxUtil, true, {4, 9, 40, 2}, 18, true),
                                  MakeSetup(kNoEvict, true, {4, 9, 40, 2}, 18, true)}) {
      SCOPED_TRACE(Describe(setup) + " seed " + std::to_string(seed));
      const SimOutcome out = RunSim(setup, requests);
      for (std::size_t i = 0; i < requests.size(); ++i) {
        ASSERT_EQ(
            out.generated[i],
            ReferenceGenerate(requests[i].prompt, requests[i].max_new_tokens, requests[i].end_id))
            << "request " << i;
      }
      EXPECT_EQ(out.free_blocks_at_end, setup.num_blocks);
    }
  }
}

TEST(SchedulerSimTest, PrefixReuseComputesFewerTokens) {
  const std::vector<SimRequest> requests = Workload(21, 24, 30);
  const SimOutcome off = RunSim(MakeSetup(kNoEvict, false, {8, 64, 64, 4}, 256, false), requests);
  const SimOutcome on = RunSim(MakeSetup(kNoEvict, false, {8, 64, 64, 4}, 256, true), requests);
  EXPECT_EQ(on.generated, off.generated);
  EXPECT_LT(on.num_computed_tokens, off.num_computed_tokens);
  std::int64_t reused = 0;
  for (const SequenceKvStats& s : on.kv_stats) reused += s.reused_blocks;
  EXPECT_GT(reused, 0);
  for (const SequenceKvStats& s : off.kv_stats) EXPECT_EQ(s.reused_blocks, 0);
}

TEST(SchedulerSimTest, StaticBatchingStartsABatchOnlyWhenTheLastOneIsDone) {
  std::vector<SimRequest> requests(5);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    requests[i].prompt = VecTokens(4, static_cast<TokenIdType>(i + 1));
    requests[i].max_new_tokens = static_cast<SizeType>(2 + 3 * (i % 2));
  }
  const SimOutcome out = RunSim(
      MakeSetup(kNoEvict, false, {2, 64, 64, 4}, 64, false, BatchingType::kStatic), requests);
  // Steps where each request is scheduled; a batch's steps never overlap the next one's.
  std::vector<int> first(requests.size(), -1), last(requests.size(), -1);
  for (int step = 0; step < static_cast<int>(out.steps.size()); ++step) {
    for (const ItemRecord& item : out.steps[step].items) {
      if (first[item.id - 1] < 0) first[item.id - 1] = step;
      last[item.id - 1] = step;
    }
  }
  EXPECT_EQ(first[0], 0);
  EXPECT_EQ(first[1], 0);
  EXPECT_GT(first[2], std::max(last[0], last[1]));
  EXPECT_EQ(first[3], first[2]);
  EXPECT_GT(first[4], std::max(last[2], last[3]));

  // In-flight batching starts request 2 as soon as request 0 leaves.
  const SimOutcome inflight =
      RunSim(MakeSetup(kNoEvict, false, {2, 64, 64, 4}, 64, false), requests);
  int first2 = -1;
  for (int step = 0; step < static_cast<int>(inflight.steps.size()) && first2 < 0; ++step) {
    for (const ItemRecord& item : inflight.steps[step].items) {
      if (item.id == 3) first2 = step;
    }
  }
  EXPECT_EQ(first2, last[0] + 1);
  EXPECT_EQ(inflight.generated, out.generated);
}

}  // namespace
}  // namespace inflight::executor::sim
