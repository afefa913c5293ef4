// The scheduler under lookahead (Scheduler::LookAhead), driven as Executor::Impl::RunStepAhead
// does: the newest step in flight is looked ahead, the next one is scheduled and launched with
// placeholder tokens, and only then does the older step come back. The fake paged model of
// sim_harness.h runs a step when it comes back, reading each placeholder from the step before's
// tokens as the device would, and checks every cached position against the sequence's true
// tokens: a block freed or handed on while a step in flight still writes it shows up as stale K/V.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sim_harness.h"

namespace inflight::executor::sim {
namespace {

struct Launched {
  ScheduleResult result;
  model::StepInput input;
};

struct AheadOutcome : SimEnd {
  int placeholders = 0;  // tokens a step read from the step before
  std::size_t max_in_flight = 0;
};

// cancel_at: request index -> the launch count after which it is cancelled (held while a step in
// flight computes it, as the executor does).
AheadOutcome RunAhead(const SimSetup& setup, const std::vector<SimRequest>& requests,
                      const std::map<std::size_t, int>& cancel_at = {}) {
  AheadOutcome out;
  SimRig rig(setup, requests, /*enqueue=*/true);
  auto& [bm, sched, seqs, model] = rig;
  std::deque<Launched> q;
  std::set<IdType> cancels, finishes;  // held until no step computes the sequence
  std::vector<TokenIdType> last_out;   // the last step's tokens, by sequence
  int launches = 0;
  const auto end_if_done = [&](Sequence* seq, std::set<IdType>& held, bool cancel) {
    if (seq->in_flight()) {
      seq->ending = true;
      held.insert(seq->id);
    } else if (cancel) {
      rig.sched.Cancel(seq);  // rig, not the binding: clang 14 cannot capture bindings
    } else {
      rig.sched.Finish(seq);
    }
  };
  for (int turn = 0; sched.HasWork() || !q.empty(); ++turn) {
    if (turn > 20000) {
      ADD_FAILURE() << "no progress after " << turn << " turns";
      break;
    }
    if (!q.empty()) {
      Launched& newest = q.back();
      for (std::size_t i = 0; i < newest.result.items.size(); ++i) {
        ScheduledItem& item = newest.result.items[i];
        Sequence* seq = item.seq;
        if (item.looked_ahead || seq->ending || cancels.count(seq->id) ||
            seq->state != SequenceState::kRunning || seq->steps_in_flight != 1) {
          continue;
        }
        if (!item.needs_sampling) {
          sched.LookAhead(item, -1);
        } else if (seq->num_generated() + 1 < seq->max_new_tokens) {
          sched.LookAhead(item, static_cast<std::int32_t>(i));
        }
      }
    }
    ScheduleResult r = sched.Schedule();
    EXPECT_EQ(bm.CheckInvariants(), "");
    for (const Sequence* p : r.paused) EXPECT_FALSE(p->in_flight()) << "paused in flight";
    const bool launched = !r.empty();
    if (launched) {
      for (const ScheduledItem& item : r.items) EXPECT_LE(item.seq->steps_in_flight, 2);
      Launched l{std::move(r), {}};
      l.input = sched.BuildStepInput(l.result);
      q.push_back(std::move(l));
      out.max_in_flight = std::max(out.max_in_flight, q.size());
      ++launches;
      for (const auto& [index, at] : cancel_at) {
        if (at != launches) continue;
        Sequence* seq = seqs[index].get();
        if (seq->state == SequenceState::kFinished) continue;
        if (seq->in_flight()) {
          cancels.insert(seq->id);
        } else {
          sched.Cancel(seq);
        }
      }
    }
    if (q.empty()) {
      ADD_FAILURE() << "nothing in flight and nothing scheduled";
      break;
    }
    if (q.size() < 2 && launched) continue;  // one step stays queued behind the running one
    Launched f = std::move(q.front());
    q.pop_front();
    for (model::SequenceStep& s : f.input.sequences) {
      if (s.previous_step_row < 0) continue;
      EXPECT_EQ(s.tokens, VecTokens{Sequence::kPendingToken});
      s.tokens = {last_out.at(static_cast<std::size_t>(s.previous_step_row))};
      ++out.placeholders;
    }
    last_out = model.Step(f.input);
    sched.OnStepComputed(f.result);
    for (std::size_t i = 0; i < f.result.items.size(); ++i) {
      const ScheduledItem& item = f.result.items[i];
      Sequence* seq = item.seq;
      for (std::set<IdType>* held : {&cancels, &finishes}) {
        if (!held->count(seq->id)) continue;
        if (!seq->in_flight()) {
          held->erase(seq->id);
          if (seq->token_pending) {
            seq->tokens.pop_back();
            seq->token_pending = false;
          }
          end_if_done(seq, *held, held == &cancels);
        } else {
          seq->ending = true;
        }
      }
      if (seq->ending && seq->token_pending && item.looked_ahead) {
        // Cancelled while the next step computes it: the device read this token; keep it known.
        seq->tokens.back() = last_out[i];
        seq->token_pending = false;
      }
      if (seq->ending || seq->state != SequenceState::kRunning || !item.needs_sampling) continue;
      if (seq->token_pending) {
        EXPECT_TRUE(item.looked_ahead);
        seq->tokens.back() = last_out[i];
        seq->token_pending = false;
      } else {
        seq->AppendToken(last_out[i]);
      }
      const SimRequest& req = requests[seq->id - 1];
      if (seq->ReachedMaxTokens() || (req.end_id && last_out[i] == *req.end_id)) {
        end_if_done(seq, finishes, false);
      }
    }
    EXPECT_EQ(bm.CheckInvariants(), "");
  }
  CollectEnd(rig, out);
  return out;
}

// Both policies, with and without reuse, a pool small enough that max_utilization pauses, prompts
// longer than a step's token budget (chunks looked ahead too), end ids mid-way: every token is
// the model's and every block comes back.
TEST(LookaheadTest, EveryTokenIsTheModelsAndNoBlockLeaks) {
  for (const auto policy :
       {CapacitySchedulerPolicy::kGuaranteedNoEvict, CapacitySchedulerPolicy::kMaxUtilization}) {
    for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
      const bool tight = policy == CapacitySchedulerPolicy::kMaxUtilization;
      SCOPED_TRACE("policy " + std::to_string(static_cast<int>(policy)) + " seed " +
                   std::to_string(seed));
      const SimSetup setup = ChunkedSetup(policy, 8, tight ? 14 : 64, 1, seed % 2 == 0);
      const std::vector<SimRequest> requests = RandomRequests(seed, 12, tight ? 16 : 40, 12);
      const AheadOutcome out = RunAhead(setup, requests);
      ASSERT_EQ(out.generated.size(), requests.size());
      for (std::size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(
            out.generated[i],
            ReferenceGenerate(requests[i].prompt, requests[i].max_new_tokens, requests[i].end_id))
            << "request " << i;
      }
      EXPECT_GT(out.placeholders, 0);
      EXPECT_EQ(out.max_in_flight, 2u);
      EXPECT_EQ(out.free_blocks_at_end, setup.num_blocks);
    }
  }
}

TEST(LookaheadTest, CancelsOfSequencesInTwoStepsLeakNoBlocks) {
  const SimSetup setup = ChunkedSetup(CapacitySchedulerPolicy::kMaxUtilization, 8, 24, 1, true);
  const std::vector<SimRequest> requests = RandomRequests(7, 9, 12, 12);
  const std::map<std::size_t, int> cancels{{0, 1}, {3, 2}, {4, 5}, {7, 9}, {8, 3}};
  const AheadOutcome out = RunAhead(setup, requests, cancels);
  ASSERT_EQ(out.generated.size(), requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const VecTokens want =
        ReferenceGenerate(requests[i].prompt, requests[i].max_new_tokens, requests[i].end_id);
    ASSERT_LE(out.generated[i].size(), want.size()) << "request " << i;
    EXPECT_TRUE(std::equal(out.generated[i].begin(), out.generated[i].end(), want.begin()))
        << "request " << i;
    if (!cancels.count(i)) {
      EXPECT_EQ(out.generated[i], want) << "request " << i;
    }
  }
  EXPECT_EQ(out.free_blocks_at_end, setup.num_blocks);
}

// A placeholder goes to the runner as previous_step_row, the row of its sequence in the step
// before; other tokens go as they are.
TEST(LookaheadTest, BuildStepInputNamesThePreviousStepsRow) {
  const SimSetup setup = ChunkedSetup(CapacitySchedulerPolicy::kGuaranteedNoEvict, 4, 32, 1, false);
  kv_cache::BlockManager bm(setup.num_blocks, setup.limits.tokens_per_block, false);
  Scheduler sched(setup.config, setup.batching, setup.limits, bm);
  Sequence a(1, {5, 6, 7}, 4), b(2, {8, 9}, 4);
  sched.Enqueue(&a);
  sched.Enqueue(&b);
  ScheduleResult first = sched.Schedule();
  ASSERT_EQ(first.items.size(), 2u);
  sched.LookAhead(first.items[1], 1);  // only b goes on before the step is back
  EXPECT_TRUE(b.token_pending);
  EXPECT_EQ(b.num_computed_tokens, 2);
  const ScheduleResult second = sched.Schedule();
  ASSERT_EQ(second.items.size(), 1u);
  EXPECT_EQ(second.items[0].seq, &b);
  const model::StepInput in = sched.BuildStepInput(second);
  EXPECT_EQ(in.sequences[0].previous_step_row, 1);
  EXPECT_EQ(in.sequences[0].num_cached, 2);
  EXPECT_EQ(b.steps_in_flight, 2);
  EXPECT_TRUE(sched.Schedule().empty());  // b is in two steps, a in one not looked ahead
  sched.OnStepComputed(first);
  EXPECT_EQ(b.steps_in_flight, 1);
  EXPECT_FALSE(b.computed_ahead);
  EXPECT_EQ(b.num_computed_tokens, 2);  // the second step's progress comes when it is back
  EXPECT_EQ(a.num_computed_tokens, 3);
}

}  // namespace
}  // namespace inflight::executor::sim
