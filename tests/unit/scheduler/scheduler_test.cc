// Exact batches for small scenarios, driven by hand.
#include "executor/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <utility>
#include <vector>

namespace inflight::executor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Logits = model::SequenceStep::Logits;

// (sequence id, num_cached, num_tokens) of every item, for compact expectations.
using Triple = std::tuple<IdType, SizeType, SizeType>;
std::vector<Triple> Items(const ScheduleResult& r) {
  std::vector<Triple> out;
  for (const ScheduledItem& i : r.items) out.emplace_back(i.seq->id, i.num_cached, i.num_tokens);
  return out;
}

std::vector<IdType> Ids(const std::vector<Sequence*>& seqs) {
  std::vector<IdType> out;
  for (const Sequence* s : seqs) out.push_back(s->id);
  return out;
}

VecTokens Iota(TokenIdType first, int n) {
  VecTokens v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

class Harness {
 public:
  Harness(SchedulerConfig config, SchedulerLimits limits, std::int64_t num_blocks,
          bool reuse = false, BatchingType batching = BatchingType::kInflight)
      : bm(num_blocks, limits.tokens_per_block, reuse), sched(config, batching, limits, bm) {}

  // Enqueues a request with a prompt of `prompt_len` distinct tokens (ids 1, 2, ... by call order).
  Sequence* Add(SizeType prompt_len, SizeType max_new, TokenIdType first_token = -1) {
    const auto id = static_cast<IdType>(seqs.size() + 1);
    if (first_token < 0) first_token = static_cast<TokenIdType>(id * 1000);
    seqs.push_back(std::make_unique<Sequence>(id, Iota(first_token, prompt_len), max_new));
    sched.Enqueue(seqs.back().get());
    return seqs.back().get();
  }

  // What the executor does after the model step: advance, sample (token 7), finish at max tokens.
  void Complete(const ScheduleResult& r) {
    sched.OnStepComputed(r);
    for (const ScheduledItem& item : r.items) {
      if (!item.needs_sampling) continue;
      item.seq->AppendToken(7);
      if (item.seq->ReachedMaxTokens()) sched.Finish(item.seq);
    }
    EXPECT_EQ(bm.CheckInvariants(), "");
  }

  ScheduleResult Step() {
    ScheduleResult r = sched.Schedule();
    EXPECT_EQ(bm.CheckInvariants(), "");
    Complete(r);
    return r;
  }

  kv_cache::BlockManager bm;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;
};

SchedulerConfig Config(CapacitySchedulerPolicy policy, bool chunked) {
  SchedulerConfig c;
  c.policy = policy;
  c.enable_chunked_context = chunked;
  return c;
}
constexpr auto kNoEvict = CapacitySchedulerPolicy::kGuaranteedNoEvict;
constexpr auto kMaxUtil = CapacitySchedulerPolicy::kMaxUtilization;

TEST(SchedulerLimitsTest, ValidateNamesTheField) {
  EXPECT_TRUE((SchedulerLimits{4, 16, 32, 4}).Validate().ok());
  const Status st = SchedulerLimits{0, 16, 32, 4}.Validate();
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("max_batch_size 0"));
  EXPECT_THAT(SchedulerLimits({4, 16, 32, -2}).Validate().message(),
              HasSubstr("tokens_per_block -2"));
}

TEST(SchedulerTest, CheckFitsNamesTheLimit) {
  Harness h(Config(kNoEvict, false), {4, 16, 32, 4}, /*num_blocks=*/6);
  EXPECT_THAT(h.sched.CheckFits(0, 1).message(), HasSubstr("input length 0"));
  EXPECT_THAT(h.sched.CheckFits(4, 0).message(), HasSubstr("max_tokens 0"));
  EXPECT_THAT(h.sched.CheckFits(20, 13).message(), HasSubstr("= 33 exceeds max_seq_len (32)"));
  EXPECT_THAT(h.sched.CheckFits(17, 1).message(), HasSubstr("(17) exceeds max_num_tokens (16)"));
  EXPECT_THAT(h.sched.CheckFits(16, 10).message(), HasSubstr("need 7 KV cache blocks"));
  EXPECT_TRUE(h.sched.CheckFits(16, 8).ok());

  Harness chunked(Config(kNoEvict, true), {4, 16, 32, 4}, 6);
  EXPECT_TRUE(chunked.sched.CheckFits(17, 1).ok());
}

TEST(SchedulerTest, PromptThatDoesNotFitTheBudgetWaitsAndKeepsFifoOrder) {
  Harness h(Config(kNoEvict, false), {4, 10, 64, 4}, 32);
  Sequence* a = h.Add(6, 4);
  h.Add(5, 4);
  h.Add(3, 4);
  ScheduleResult r1 = h.Step();
  // B (5) does not fit the 4 tokens left; C (3) would, but must not overtake B.
  EXPECT_THAT(Items(r1), ElementsAre(Triple{1, 0, 6}));
  EXPECT_TRUE(r1.items[0].needs_sampling);
  EXPECT_EQ(r1.items[0].logits, Logits::kLast);
  EXPECT_EQ(r1.stats.num_waiting, 2);
  EXPECT_EQ(r1.stats.num_context, 1);
  EXPECT_EQ(r1.stats.num_context_tokens, 6);
  EXPECT_EQ(a->num_computed_tokens, 6);
  EXPECT_EQ(a->num_tokens(), 7);

  ScheduleResult r2 = h.Step();
  EXPECT_THAT(Items(r2), ElementsAre(Triple{1, 6, 1}, Triple{2, 0, 5}, Triple{3, 0, 3}));
  EXPECT_FALSE(r2.items[0].is_context);
  EXPECT_EQ(r2.stats.num_context, 2);
  EXPECT_EQ(r2.stats.num_generation, 1);
  EXPECT_EQ(r2.stats.num_context_tokens, 8);
  EXPECT_EQ(r2.stats.num_running, 3);
}

TEST(SchedulerTest, ChunkedPromptSharesStepsWithDecodesInBlockAlignedChunks) {
  Harness h(Config(kNoEvict, true), {4, 10, 64, 4}, 32);
  h.Add(3, 10);
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{1, 0, 3}));
  h.Add(23, 2);
  ScheduleResult r2 = h.Step();
  EXPECT_THAT(Items(r2), ElementsAre(Triple{1, 3, 1}, Triple{2, 0, 8}));
  EXPECT_FALSE(r2.items[1].needs_sampling);
  EXPECT_EQ(r2.items[1].logits, Logits::kNone);
  ScheduleResult r3 = h.Step();
  EXPECT_THAT(Items(r3), ElementsAre(Triple{1, 4, 1}, Triple{2, 8, 8}));
  ScheduleResult r4 = h.Step();
  EXPECT_THAT(Items(r4), ElementsAre(Triple{1, 5, 1}, Triple{2, 16, 7}));
  EXPECT_TRUE(r4.items[1].needs_sampling);
  EXPECT_EQ(r4.items[1].logits, Logits::kLast);
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{1, 6, 1}, Triple{2, 23, 1}));
}

TEST(SchedulerTest, BudgetUnderOneBlockIsTakenWhole) {
  Harness h(Config(kNoEvict, true), {4, 3, 64, 4}, 32);
  h.Add(10, 1);
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{1, 0, 3}));
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{1, 3, 3}));
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{1, 6, 3}));
  ScheduleResult last = h.Step();
  EXPECT_THAT(Items(last), ElementsAre(Triple{1, 9, 1}));
  EXPECT_TRUE(last.items[0].needs_sampling);
  EXPECT_FALSE(h.sched.HasWork());
}

TEST(SchedulerTest, DecodesGoBeforeOlderPromptChunks) {
  Harness h(Config(kNoEvict, true), {4, 10, 64, 4}, 32);
  h.Add(20, 4);
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{1, 0, 8}));
  h.Add(2, 4);
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{1, 8, 8}, Triple{2, 0, 2}));
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{2, 2, 1}, Triple{1, 16, 4}));
}

TEST(SchedulerTest, BatchSizeCapsRunningSequences) {
  Harness h(Config(kNoEvict, false), {2, 64, 64, 4}, 32);
  h.Add(3, 5);
  h.Add(3, 5);
  h.Add(3, 5);
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{1, 0, 3}, Triple{2, 0, 3}));
  ScheduleResult r = h.Step();
  EXPECT_THAT(Items(r), ElementsAre(Triple{1, 3, 1}, Triple{2, 3, 1}));
  EXPECT_EQ(r.stats.num_waiting, 1);
}

TEST(SchedulerTest, GuaranteedNoEvictAdmitsOnlyWhatItCanFinish) {
  // 10 blocks of 4; each request needs 4 blocks to reach prompt + max_new = 16 tokens.
  Harness h(Config(kNoEvict, false), {8, 64, 64, 4}, 10);
  Sequence* a = h.Add(8, 8);
  h.Add(8, 8);
  Sequence* c = h.Add(8, 8);
  ScheduleResult r1 = h.Step();
  EXPECT_THAT(Items(r1), ElementsAre(Triple{1, 0, 8}, Triple{2, 0, 8}));
  EXPECT_EQ(h.bm.NumFreeBlocks(), 6);  // only 4 held now, but 4 more are promised
  EXPECT_EQ(c->state, SequenceState::kWaiting);
  for (int i = 0; i < 7; ++i) {
    ScheduleResult r = h.Step();
    EXPECT_TRUE(r.paused.empty());
    EXPECT_EQ(r.items.size(), 2u) << "step " << i;
    EXPECT_EQ(c->state, SequenceState::kWaiting);
  }
  EXPECT_EQ(a->state, SequenceState::kFinished);
  ScheduleResult r9 = h.Step();
  EXPECT_EQ(r9.items.back().seq, c);
  EXPECT_EQ(a->kv_stats.alloc_total_blocks, 4);

  // Under max_utilization the same three are admitted at once: their prompts fit now.
  Harness mu(Config(kMaxUtil, false), {8, 64, 64, 4}, 10);
  for (int i = 0; i < 3; ++i) mu.Add(8, 8);
  EXPECT_EQ(mu.Step().items.size(), 3u);
}

TEST(SchedulerTest, MaxUtilizationPausesNewestFirstAndResumesOldestFirst) {
  // 6 blocks of 2 tokens; prompts of 3 tokens take 2 blocks each.
  Harness h(Config(kMaxUtil, false), {8, 64, 64, 2}, 6);
  Sequence* a = h.Add(3, 5);
  Sequence* b = h.Add(3, 5);
  Sequence* c = h.Add(3, 5);
  EXPECT_EQ(h.Step().items.size(), 3u);
  EXPECT_EQ(h.Step().items.size(), 3u);  // position 3 still fits in each sequence's second block
  EXPECT_EQ(h.bm.NumFreeBlocks(), 0);

  // A needs a third block: C, the newest, is paused; its two blocks serve A and B.
  ScheduleResult r3 = h.Step();
  EXPECT_THAT(Ids(r3.paused), ElementsAre(3));
  EXPECT_THAT(Items(r3), ElementsAre(Triple{1, 4, 1}, Triple{2, 4, 1}));
  EXPECT_EQ(c->state, SequenceState::kPaused);
  EXPECT_EQ(c->num_computed_tokens, 0);
  EXPECT_EQ(c->num_pauses, 1);
  EXPECT_EQ(c->num_tokens(), 5);  // keeps its generated tokens
  EXPECT_EQ(r3.stats.num_paused, 1);
  EXPECT_EQ(r3.stats.num_paused_now, 1);

  // C's 5 tokens need 3 blocks: none free, so it stays paused.
  ScheduleResult r4 = h.Step();
  EXPECT_THAT(Items(r4), ElementsAre(Triple{1, 5, 1}, Triple{2, 5, 1}));
  EXPECT_EQ(c->state, SequenceState::kPaused);

  // A needs a fourth block: B is now the newest running one.
  ScheduleResult r5 = h.Step();
  EXPECT_THAT(Ids(r5.paused), ElementsAre(2));
  EXPECT_THAT(Items(r5), ElementsAre(Triple{1, 6, 1}));
  EXPECT_EQ(a->state, SequenceState::kFinished);  // 5 tokens generated

  // The older (B) resumes first, recomputing prompt + 4 generated tokens (4 blocks); C's 3 do not
  // fit beside it.
  ScheduleResult r6 = h.Step();
  EXPECT_THAT(Items(r6), ElementsAre(Triple{2, 0, 7}));
  EXPECT_TRUE(r6.items[0].is_context);
  EXPECT_TRUE(r6.items[0].needs_sampling);
  EXPECT_EQ(r6.stats.num_paused, 1);
  EXPECT_EQ(b->state, SequenceState::kFinished);
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{3, 0, 5}));
}

TEST(SchedulerTest, PausedSequenceResumesBeforeNewOnes) {
  Harness h(Config(kMaxUtil, false), {8, 64, 64, 2}, 4);
  h.Add(3, 4);  // 2 blocks
  h.Add(3, 3);  // 2 blocks
  h.Step();
  h.Step();
  ScheduleResult r = h.Step();  // A needs a third block: B paused
  EXPECT_THAT(Ids(r.paused), ElementsAre(2));
  h.Add(1, 1);  // new C fits a free block now, but B waits first
  ScheduleResult r4 = h.Step();
  EXPECT_THAT(Items(r4), ElementsAre(Triple{1, 5, 1}));
  EXPECT_EQ(h.seqs[2]->state, SequenceState::kWaiting);
  ScheduleResult r5 = h.Step();  // A finished last step: B resumes, then C
  EXPECT_THAT(Items(r5), ElementsAre(Triple{2, 0, 5}, Triple{3, 0, 1}));
}

TEST(SchedulerTest, StaticBatchingAdmitsOnlyWhenIdle) {
  Harness h(Config(kNoEvict, false), {4, 64, 64, 4}, 32, false, BatchingType::kStatic);
  Sequence* a = h.Add(3, 1);
  Sequence* b = h.Add(3, 3);
  EXPECT_EQ(h.Step().items.size(), 2u);
  EXPECT_EQ(a->state, SequenceState::kFinished);
  Sequence* c = h.Add(3, 1);
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{2, 3, 1}));
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{2, 4, 1}));
  EXPECT_EQ(b->state, SequenceState::kFinished);
  EXPECT_EQ(c->state, SequenceState::kWaiting);
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{3, 0, 3}));
}

TEST(SchedulerTest, SecondIdenticalPromptComputesOnlyTheUncachedTail) {
  Harness h(Config(kNoEvict, false), {4, 64, 64, 4}, 32, /*reuse=*/true);
  Sequence* a = h.Add(10, 1, 100);
  EXPECT_THAT(Items(h.Step()), ElementsAre(Triple{1, 0, 10}));
  EXPECT_EQ(a->state, SequenceState::kFinished);
  Sequence* b = h.Add(10, 1, 100);
  ScheduleResult r = h.Step();
  EXPECT_THAT(Items(r), ElementsAre(Triple{2, 8, 2}));
  EXPECT_EQ(r.stats.num_context_tokens, 2);
  EXPECT_EQ(b->kv_stats.reused_blocks, 2);
  EXPECT_EQ(b->kv_stats.alloc_new_blocks, 1);
  // The model sees positions 8..9 over a table of all three blocks, the first two shared with A's.
  Sequence* c = h.Add(10, 1, 100);
  ScheduleResult rc = h.sched.Schedule();
  const model::StepInput in = h.sched.BuildStepInput(rc);
  ASSERT_EQ(in.sequences.size(), 1u);
  EXPECT_EQ(in.sequences[0].seq_id, static_cast<std::int64_t>(c->id));
  EXPECT_EQ(in.sequences[0].num_cached, 8);
  EXPECT_THAT(in.sequences[0].tokens, ElementsAre(108, 109));
  EXPECT_THAT(in.sequences[0].block_table, ElementsAre(0, 1, ::testing::_));
  EXPECT_EQ(in.sequences[0].logits, Logits::kLast);
}

TEST(SchedulerTest, BuildStepInputTrimsTheTableToTheComputedRange) {
  Harness h(Config(kNoEvict, true), {4, 8, 64, 4}, 32);
  h.Add(20, 1);
  ScheduleResult r = h.sched.Schedule();
  const model::StepInput in = h.sched.BuildStepInput(r);
  ASSERT_EQ(in.sequences.size(), 1u);
  EXPECT_EQ(h.bm.BlockTable(1).size(), 5u);  // the whole prompt is allocated at admission
  EXPECT_THAT(in.sequences[0].block_table, ElementsAre(0, 1));
  EXPECT_THAT(in.sequences[0].tokens, ElementsAre(1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007));
  EXPECT_EQ(in.sequences[0].logits, Logits::kNone);
}

TEST(SchedulerTest, ContextLogitsComputeTheWholePromptAndReturnAllRows) {
  Harness h(Config(kNoEvict, false), {4, 64, 64, 4}, 32, /*reuse=*/true);
  h.Add(10, 2, 100);
  h.Step();
  h.Step();
  Sequence* b = h.Add(10, 2, 100);
  b->return_context_logits = true;
  ScheduleResult r = h.Step();
  EXPECT_THAT(Items(r), ElementsAre(Triple{2, 0, 10}));  // no reuse: every prompt row is needed
  EXPECT_EQ(r.items[0].logits, Logits::kAll);
  EXPECT_TRUE(r.items[0].needs_sampling);
  ScheduleResult r2 = h.Step();
  EXPECT_EQ(r2.items[0].logits, Logits::kLast);
}

TEST(SchedulerTest, CancelFreesBlocksInEveryState) {
  Harness h(Config(kMaxUtil, false), {8, 64, 64, 2}, 4);
  Sequence* a = h.Add(3, 5);
  Sequence* b = h.Add(3, 3);
  h.Step();
  h.Step();
  h.Step();  // B paused
  ASSERT_EQ(b->state, SequenceState::kPaused);
  Sequence* c = h.Add(2, 2);
  ASSERT_EQ(c->state, SequenceState::kWaiting);
  ASSERT_EQ(a->state, SequenceState::kRunning);

  ScheduleResult pending =
      h.sched.Schedule();  // A scheduled, then cancelled before the step completes
  ASSERT_EQ(pending.items.size(), 1u);
  h.sched.Cancel(a);
  h.sched.Cancel(b);
  h.sched.Cancel(c);
  h.sched.Cancel(c);                // twice: no-op
  h.sched.OnStepComputed(pending);  // skips the cancelled sequence
  EXPECT_EQ(a->num_computed_tokens, 5);
  for (Sequence* s : {a, b, c}) EXPECT_EQ(s->state, SequenceState::kFinished);
  EXPECT_FALSE(h.sched.HasWork());
  EXPECT_EQ(h.bm.NumFreeBlocks(), 4);
  EXPECT_EQ(h.bm.CheckInvariants(), "");
  EXPECT_TRUE(h.sched.Schedule().empty());
}

}  // namespace
}  // namespace inflight::executor
