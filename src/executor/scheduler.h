// The scheduler: which sequences run this step, and how many of their tokens.
//
// Driven from the executor's loop, on one thread (not thread-safe):
//
//   // at enqueue: CheckFits(prompt_len, max_new_tokens) ok, then Enqueue(seq)
//   while (scheduler.HasWork()) {
//     ScheduleResult step = scheduler.Schedule();  // may pause sequences (step.paused)
//     if (step.empty()) { wait for new requests; continue; }
//     model::StepInput in = scheduler.BuildStepInput(step);
//     Result<model::StepOutput> out = runner.Step(in);
//     scheduler.OnStepComputed(step);  // num_computed_tokens advance; full blocks reusable
//     for (i, item) in step.items:     // item i's logits rows start at out.row_begin[i]
//       if (item.needs_sampling) {
//         item.seq->AppendToken(sample(the last row of item i));
//         if (done(item.seq)) scheduler.Finish(item.seq);  // blocks freed at once
//       }
//     // a cancelled request: scheduler.Cancel(seq), in any state
//   }
//
// Each step fills a budget of max_batch_size sequences and max_num_tokens tokens, in this order:
//   1. running sequences, oldest first: decodes (1 token), then prompts computed in chunks;
//   2. paused sequences (max_utilization), oldest first, recomputing prompt + generated;
//   3. new sequences from the FIFO queue.
// A sequence that does not fit (budget, blocks) stops steps 2 and 3: no one overtakes an older
// request.
//
// Chunking: with enable_chunked_context a computation longer than the remaining token budget is
// split; a chunk ends on a block boundary (so its blocks become full and reusable) unless the
// remaining budget is under one block, which is then taken whole. Without it, such a sequence
// waits for a later step.
// NOTE: a recompute after a pause that is longer than max_num_tokens is chunked even without
// enable_chunked_context; it could never run otherwise.
//
// Capacity policies:
//   guaranteed_no_evict  admits a sequence only when the free blocks cover what every admitted
//                        sequence may still need to reach prompt + max_new_tokens; never pauses.
//   max_utilization      admits a sequence when its prompt's blocks fit now. When a scheduled
//                        sequence cannot get a block, the most recently admitted running sequence
//                        is paused: its blocks are freed (computed full blocks stay in the prefix
//                        cache) and num_computed_tokens = 0.
// Static batching (kStatic): new sequences are admitted only when nothing is running or paused;
// that batch then runs to completion.
//
// Micro-batches (pipeline parallelism, max_micro_batches = pp_size > 1): the executor keeps up to
// that many steps in flight, so that stage s computes micro-batch m while stage s + 1 computes
// m - 1. Each Schedule() call then builds one micro-batch from the sequences that are not in
// flight (Sequence::in_flight()): a sequence's next token depends on its previous step, so it is in
// at most one micro-batch until OnStepComputed returns it. An in-flight sequence is never paused
// (the pipeline still writes its blocks). A micro-batch holds at most
//   min(ceil(max_batch_size / max_micro_batches), max(1, ceil(sequences / max_micro_batches)))
// sequences (sequences: running + paused + waiting), so that the requests spread over the
// micro-batches instead of filling the first; max_batch_size still bounds the running sequences of
// all micro-batches together, and max_num_tokens bounds each micro-batch.
//
//   stage 0:  [mb0][mb1][mb0'][mb1'] ...      mb0' = mb0's sequences, one token later
//   stage 1:       [mb0][mb1 ][mb0'] ...
//
// Lookahead (one micro-batch, a runner that reads a step's tokens from the step before on the
// device): the executor calls LookAhead on the items of the one step in flight, which counts their
// tokens as computed (a sampling item gets a placeholder token), so that the next Schedule() may
// take those sequences again before the step is back: a sequence is then in at most two steps.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "executor/sequence.h"
#include "inflight/executor.h"
#include "inflight/status.h"
#include "inflight/types.h"
#include "kv_cache/block_manager.h"
#include "model/model_runner.h"

namespace inflight::executor {

struct SchedulerLimits {
  SizeType max_batch_size = 1;     // sequences running at once (and per step); >= 1
  SizeType max_num_tokens = 1;     // tokens computed per step, all sequences together; >= 1
  SizeType max_seq_len = 1;        // prompt + generated tokens of one sequence; >= 1
  SizeType tokens_per_block = 1;   // must equal the BlockManager's; >= 1
  SizeType max_micro_batches = 1;  // steps in flight at once (pipeline stages); >= 1
  Status Validate() const;         // names the field, its value and the accepted range
};

// One sequence's share of a step.
struct ScheduledItem {
  Sequence* seq = nullptr;
  // seq->num_computed_tokens when scheduled: the position of the first token computed.
  SizeType num_cached = 0;
  SizeType num_tokens = 0;  // computed this step: seq->tokens[num_cached, num_cached + num_tokens)
  bool is_context = false;  // a prompt (chunk) or a recompute, not a one-token decode
  // The step reaches the sequence's last known token: the last logits row gives the next token.
  bool needs_sampling = false;
  model::SequenceStep::Logits logits = model::SequenceStep::Logits::kNone;
  // Scheduler::LookAhead took this item's progress before its step came back.
  bool looked_ahead = false;
  // Valid until seq->AppendToken.
  std::span<const TokenIdType> tokens() const {
    return std::span<const TokenIdType>(seq->tokens)
        .subspan(static_cast<std::size_t>(num_cached), static_cast<std::size_t>(num_tokens));
  }
};

// Counters for IterationStats, taken at the end of Schedule().
struct ScheduleStats {
  std::int64_t num_waiting = 0;         // queued, never admitted
  std::int64_t num_running = 0;         // hold blocks (scheduled this step or not)
  std::int64_t num_paused = 0;          // waiting to recompute
  std::int64_t num_scheduled = 0;       // items.size()
  std::int64_t num_context = 0;         // items with is_context
  std::int64_t num_generation = 0;      // items without
  std::int64_t num_context_tokens = 0;  // tokens of the context items
  std::int64_t num_paused_now = 0;      // sequences this Schedule() call paused
};

struct ScheduleResult {
  std::vector<ScheduledItem> items;  // in the order described above; each sequence at most once
  std::vector<Sequence*> paused;     // paused by this call (blocks already freed)
  ScheduleStats stats;
  bool empty() const { return items.empty(); }
  std::int64_t num_tokens() const;
};

class Scheduler {
 public:
  // `limits` must be valid (Validate()) and tokens_per_block equal block_manager's; asserted. The
  // block manager must outlive the scheduler and be used by nothing else while the scheduler runs.
  Scheduler(const SchedulerConfig& config, BatchingType batching_type,
            const SchedulerLimits& limits, kv_cache::BlockManager& block_manager);

  // Whether a request of this shape can ever run under these limits and this pool; the error names
  // the field, the value and the limit. Call it before Enqueue: an enqueued request that does not
  // fit would wait forever.
  Status CheckFits(SizeType prompt_len, SizeType max_new_tokens) const;

  // Appends to the FIFO queue. Precondition: seq->state == kWaiting, holds no blocks, not enqueued
  // yet, at least one prompt token. seq must stay alive until Finish / Cancel and until
  // OnStepComputed of any ScheduleResult that names it.
  void Enqueue(Sequence* seq);

  // Builds the next step's batch (possibly empty) and reserves its blocks.
  ScheduleResult Schedule();

  // The model's input for `result`: for each item, its tokens, num_cached, the block table trimmed
  // to the blocks that hold positions [0, num_cached + num_tokens), and the logits kind.
  model::StepInput BuildStepInput(const ScheduleResult& result) const;
  // The same into *input, reusing its sequences and their vectors' storage: a decode step of 1,024
  // sequences allocated ~2,000 small vectors anew, and the heap's trim and regrowth page-faulted
  // (inflight-bench-executor-host).
  void BuildStepInput(const ScheduleResult& result, model::StepInput* input) const;

  // Call after the model computed `result` (before appending sampled tokens): advances each item's
  // num_computed_tokens, registers blocks that became full in the prefix cache and takes the
  // items out of flight. Items whose sequence was finished or cancelled in between are skipped.
  void OnStepComputed(const ScheduleResult& result);

  // Lookahead (the executor's, with a runner that reads a step's tokens from the step before on
  // the device): `item` of the one step in flight counts as computed now, so that the next step
  // can take its sequence before this one is back. A prompt chunk's sequence moves on to its next
  // chunk; a sequence whose item samples its next token gets a placeholder token
  // (Sequence::token_pending) that the next step decodes, reading the token the runner samples for
  // this step's sequence `sampled_row` on the device. Precondition: the sequence is running, in
  // this step only, and the step's other items were not looked ahead for it.
  void LookAhead(ScheduledItem& item, std::int32_t sampled_row);
  // A step that never ran or failed: its sequences leave it without progress (they are failed
  // next, or when the step after it is back).
  void OnStepDropped(const ScheduleResult& result);

  // Frees seq's blocks at once, adds its block stats to seq->kv_stats, forgets it; state kFinished.
  // Valid in any state (Cancel of a waiting or paused request included); a second call is a no-op.
  // An in-flight sequence may be finished only when its micro-batch failed (the model no longer
  // writes its blocks); the executor holds a cancel back until the micro-batch is back.
  void Finish(Sequence* seq);
  void Cancel(Sequence* seq) { Finish(seq); }

  std::int64_t num_waiting() const { return static_cast<std::int64_t>(waiting_.size()); }
  std::int64_t num_running() const { return static_cast<std::int64_t>(running_.size()); }
  std::int64_t num_paused() const { return static_cast<std::int64_t>(paused_.size()); }
  bool HasWork() const { return !waiting_.empty() || !running_.empty() || !paused_.empty(); }
  // Sequences in micro-batches the model has not finished.
  std::int64_t num_in_flight() const;
  const SchedulerLimits& limits() const { return limits_; }

 private:
  // Tokens of `seq` to compute this step when its computation starts at `start` and `remaining` are
  // left; 0 when it must wait.
  SizeType TokensThisStep(SizeType start, SizeType remaining, SizeType budget) const;
  // Blocks a running sequence may still need to reach prompt + max_new_tokens.
  std::int64_t BlocksStillNeeded(const Sequence* seq) const;
  // Allocates blocks for a waiting or paused sequence and schedules it; false when it does not fit
  // now. reserved: the running sequences' BlocksStillNeeded sum (guaranteed_no_evict), computed on
  // the first call of a step and kept up to date by the admissions after it: summing it per call
  // cost a hash lookup per running sequence per admission (~1024 x 8 a step at 128/128).
  bool TryAdmit(Sequence* seq, SizeType& budget, ScheduleResult& result,
                std::optional<std::int64_t>& reserved);
  void AddItem(Sequence* seq, SizeType num_tokens, ScheduleResult& result);
  // The most sequences this micro-batch may hold (the formula at the top of this file).
  std::size_t MicroBatchCap() const;
  // The most recently admitted running sequence that is not in flight; null when all are.
  Sequence* PauseVictim() const;
  // Not in a step in flight, or in one whose progress it already counts (LookAhead).
  static bool Schedulable(const Sequence& s) {
    return s.steps_in_flight == 0 || (s.computed_ahead && s.steps_in_flight == 1);
  }
  // Frees the blocks of seq (pause) and removes its item from result if it had one.
  void Pause(Sequence* seq, SizeType& budget, ScheduleResult& result);
  void ReleaseBlocks(Sequence* seq);
  static void InsertByArrival(std::vector<Sequence*>& list, Sequence* seq);

  SchedulerConfig config_;
  BatchingType batching_type_;
  SchedulerLimits limits_;
  kv_cache::BlockManager& blocks_;
  std::deque<Sequence*> waiting_;   // FIFO
  std::vector<Sequence*> running_;  // by arrival, oldest first
  std::vector<Sequence*> paused_;   // by arrival, oldest first
  std::uint64_t next_arrival_ = 0;
};

}  // namespace inflight::executor
