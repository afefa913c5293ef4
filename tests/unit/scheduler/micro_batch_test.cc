// The scheduler with micro-batches in flight (pipeline parallelism, max_micro_batches > 1): a loop
// that keeps up to `depth` steps in flight, as the executor does with a pipelined runner, over the
// fake paged model of sim_harness.h. The model writes a micro-batch's K/V when the micro-batch
// comes back (the last stage is the one that finishes it), from the block tables it was launched
// with, so a block freed or handed to another sequence under the pipeline shows up as stale K/V.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sim_harness.h"

namespace inflight::executor::sim {
namespace {

struct InFlight {
  ScheduleResult result;
  model::StepInput input;  // as launched: the block tables the pipeline writes
};

struct PipelineOutcome : SimEnd {
  std::vector<std::size_t> micro_batch_sizes;  // items of every non-empty micro-batch
  std::size_t max_in_flight = 0;               // micro-batches in flight at once, at most
  std::int64_t num_pauses = 0;
};

// cancel_at: request index -> the launch count after which the executor cancels it (held back
// until its micro-batch is back when it is in flight, as Executor::Impl does).
PipelineOutcome RunPipeline(const SimSetup& setup, const std::vector<SimRequest>& requests,
                            const std::map<std::size_t, int>& cancel_at = {}) {
  PipelineOutcome out;
  SimRig rig(setup, requests, /*enqueue=*/true);
  auto& [bm, sched, seqs, model] = rig;
  const auto depth = static_cast<std::size_t>(setup.limits.max_micro_batches);
  std::deque<InFlight> pipeline;
  std::set<IdType> cancel_pending;
  int launches = 0;
  for (int turn = 0; sched.HasWork() || !pipeline.empty(); ++turn) {
    if (turn > 20000) {
      ADD_FAILURE() << "no progress after " << turn << " turns";
      break;
    }
    // Launch while there is room and something to launch.
    while (pipeline.size() < depth) {
      ScheduleResult r = sched.Schedule();
      out.num_pauses += static_cast<std::int64_t>(r.paused.size());
      EXPECT_EQ(bm.CheckInvariants(), "");
      if (r.empty()) break;
      std::set<const Sequence*> in_flight;
      for (const InFlight& f : pipeline) {
        for (const ScheduledItem& item : f.result.items) in_flight.insert(item.seq);
      }
      for (const ScheduledItem& item : r.items) {
        EXPECT_FALSE(in_flight.count(item.seq))
            << "sequence " << item.seq->id << " in two micro-batches in flight";
        EXPECT_TRUE(item.seq->in_flight());
      }
      for (const Sequence* p : r.paused) {
        EXPECT_FALSE(in_flight.count(p)) << "sequence " << p->id << " paused while in flight";
      }
      EXPECT_LE(sched.num_running(), setup.limits.max_batch_size);
      out.micro_batch_sizes.push_back(r.items.size());
      InFlight f{std::move(r), {}};
      f.input = sched.BuildStepInput(f.result);
      pipeline.push_back(std::move(f));
      out.max_in_flight = std::max(out.max_in_flight, pipeline.size());
      ++launches;
      for (const auto& [index, at] : cancel_at) {
        if (at != launches) continue;
        Sequence* seq = seqs[index].get();
        if (seq->in_flight()) {
          cancel_pending.insert(seq->id);
        } else {
          sched.Cancel(seq);
        }
      }
    }
    if (pipeline.empty()) {
      ADD_FAILURE() << "nothing in flight and nothing scheduled: " << sched.num_waiting()
                    << " waiting, " << sched.num_running() << " running";
      break;
    }
    // The oldest micro-batch comes back.
    InFlight f = std::move(pipeline.front());
    pipeline.pop_front();
    const std::vector<TokenIdType> next = model.Step(f.input);
    sched.OnStepComputed(f.result);
    for (std::size_t i = 0; i < f.result.items.size(); ++i) {
      Sequence* seq = f.result.items[i].seq;
      EXPECT_FALSE(seq->in_flight());
      if (cancel_pending.erase(seq->id)) {
        sched.Cancel(seq);
        continue;
      }
      if (seq->state != SequenceState::kRunning || !f.result.items[i].needs_sampling) continue;
      seq->AppendToken(next[i]);
      const SimRequest& req = requests[seq->id - 1];
      if (seq->ReachedMaxTokens() || (req.end_id && next[i] == *req.end_id)) sched.Finish(seq);
    }
    EXPECT_EQ(bm.CheckInvariants(), "");
  }
  CollectEnd(rig, out);
  return out;
}

void ExpectReferenceTokens(const std::vector<SimRequest>& requests, const PipelineOutcome& out) {
  ASSERT_EQ(out.generated.size(), requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(out.generated[i],
              ReferenceGenerate(requests[i].prompt, requests[i].max_new_tokens, requests[i].end_id))
        << "request " << i;
  }
}

TEST(MicroBatchTest, TwoStagesSplitFourRequestsIntoTwoMicroBatchesOfTwo) {
  const SimSetup setup = ChunkedSetup(CapacitySchedulerPolicy::kGuaranteedNoEvict, 8, 64, 2, true);
  std::vector<SimRequest> requests(4);
  for (std::size_t i = 0; i < 4; ++i) {
    requests[i].prompt = {static_cast<TokenIdType>(i + 1), 9, 9};
    requests[i].max_new_tokens = 5;
  }
  const PipelineOutcome out = RunPipeline(setup, requests);
  ExpectReferenceTokens(requests, out);
  EXPECT_EQ(out.max_in_flight, 2u);
  // Five steps of each half: every micro-batch holds two of the four requests.
  EXPECT_EQ(out.micro_batch_sizes, std::vector<std::size_t>(10, 2));
  EXPECT_EQ(out.free_blocks_at_end, setup.num_blocks);
}

TEST(MicroBatchTest, OneRequestIsNeverInTwoMicroBatches) {
  const SimSetup setup = ChunkedSetup(CapacitySchedulerPolicy::kGuaranteedNoEvict, 8, 64, 4, true);
  std::vector<SimRequest> requests(1);
  requests[0].prompt = {1, 2, 3};
  requests[0].max_new_tokens = 6;
  const PipelineOutcome out = RunPipeline(setup, requests);
  ExpectReferenceTokens(requests, out);
  EXPECT_EQ(out.max_in_flight, 1u);  // nothing else to put beside it
  EXPECT_EQ(out.micro_batch_sizes.size(), 6u);
}

TEST(MicroBatchTest, MaxBatchSizeBoundsTheMicroBatchesTogether) {
  const SimSetup setup = ChunkedSetup(CapacitySchedulerPolicy::kGuaranteedNoEvict, 4, 128, 2, true);
  const std::vector<SimRequest> requests = RandomRequests(5, 12, 10, 6);
  const PipelineOutcome out = RunPipeline(setup, requests);
  ExpectReferenceTokens(requests, out);
  for (std::size_t n : out.micro_batch_sizes) EXPECT_LE(n, 2u);  // ceil(4 / 2)
  EXPECT_EQ(out.max_in_flight, 2u);
  EXPECT_EQ(out.free_blocks_at_end, setup.num_blocks);
}

// A small pool under max_utilization pauses sequences; never one in flight, and the tokens are
// still the model's.
TEST(MicroBatchTest, PausesOnlySequencesOutOfFlight) {
  for (SizeType depth : {2, 3, 4}) {
    for (std::uint32_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE("depth " + std::to_string(depth) + " seed " + std::to_string(seed));
      SimSetup setup = ChunkedSetup(CapacitySchedulerPolicy::kMaxUtilization, 8, 14, depth, true);
      setup.enable_reuse = seed % 2 == 0;
      const std::vector<SimRequest> requests = RandomRequests(seed, 10, 16, 12);
      const PipelineOutcome out = RunPipeline(setup, requests);
      ExpectReferenceTokens(requests, out);
      EXPECT_EQ(out.free_blocks_at_end, setup.num_blocks);
    }
  }
}

TEST(MicroBatchTest, GuaranteedNoEvictRunsEveryDepthToTheReferenceTokens) {
  for (SizeType depth : {1, 2, 4}) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    SimSetup setup = ChunkedSetup(CapacitySchedulerPolicy::kGuaranteedNoEvict, 6, 40, depth, true);
    const std::vector<SimRequest> requests = RandomRequests(11 + depth, 14, 20, 10);
    const PipelineOutcome out = RunPipeline(setup, requests);
    ExpectReferenceTokens(requests, out);
    EXPECT_LE(out.max_in_flight, static_cast<std::size_t>(depth));
    EXPECT_EQ(out.free_blocks_at_end, setup.num_blocks);
  }
}

// Cancels land while micro-batches are in flight (held back for the in-flight ones): every block
// comes back and the requests that were not cancelled keep their tokens.
TEST(MicroBatchTest, CancelsInTheMiddleOfThePipelineLeakNoBlocks) {
  const SimSetup setup = ChunkedSetup(CapacitySchedulerPolicy::kMaxUtilization, 8, 24, 2, true);
  const std::vector<SimRequest> requests = RandomRequests(7, 9, 12, 12);
  const std::map<std::size_t, int> cancels{{0, 1}, {3, 2}, {4, 5}, {7, 9}, {8, 1}};
  const PipelineOutcome out = RunPipeline(setup, requests, cancels);
  ASSERT_EQ(out.generated.size(), requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const VecTokens want =
        ReferenceGenerate(requests[i].prompt, requests[i].max_new_tokens, requests[i].end_id);
    if (cancels.count(i)) {
      // A prefix of the model's tokens: cancelled before the end.
      ASSERT_LE(out.generated[i].size(), want.size()) << "request " << i;
      EXPECT_TRUE(std::equal(out.generated[i].begin(), out.generated[i].end(), want.begin()))
          << "request " << i;
    } else {
      EXPECT_EQ(out.generated[i], want) << "request " << i;
    }
  }
  EXPECT_EQ(out.free_blocks_at_end, setup.num_blocks);
}

TEST(MicroBatchTest, ZeroMicroBatchesIsRefusedByName) {
  SchedulerLimits limits{4, 24, 64, 4, 0};
  const Status st = limits.Validate();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("max_micro_batches 0"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace inflight::executor::sim
