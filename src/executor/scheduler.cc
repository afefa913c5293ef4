#include "executor/scheduler.h"

#include <algorithm>
#include <cassert>
#include <string>

#include "common/logging.h"

namespace inflight::executor {
namespace {

using model::SequenceStep;

template <typename Container>
void EraseValue(Container& c, Sequence* seq) {
  auto it = std::find(c.begin(), c.end(), seq);
  if (it != c.end()) c.erase(it);
}

}  // namespace

Status SchedulerLimits::Validate() const {
  auto check = [](const char* name, SizeType value) -> Status {
    if (value >= 1) return Status::Ok();
    return InvalidArgument(std::string(name) + " " + std::to_string(value) +
                           " is out of range: must be >= 1");
  };
  RETURN_IF_ERROR(check("max_batch_size", max_batch_size));
  RETURN_IF_ERROR(check("max_num_tokens", max_num_tokens));
  RETURN_IF_ERROR(check("max_seq_len", max_seq_len));
  RETURN_IF_ERROR(check("tokens_per_block", tokens_per_block));
  RETURN_IF_ERROR(check("max_micro_batches", max_micro_batches));
  return Status::Ok();
}

std::int64_t ScheduleResult::num_tokens() const {
  std::int64_t n = 0;
  for (const ScheduledItem& item : items) n += item.num_tokens;
  return n;
}

Scheduler::Scheduler(const SchedulerConfig& config, BatchingType batching_type,
                     const SchedulerLimits& limits, kv_cache::BlockManager& block_manager)
    : config_(config), batching_type_(batching_type), limits_(limits), blocks_(block_manager) {
  assert(limits_.Validate().ok());
  assert(limits_.tokens_per_block == blocks_.tokens_per_block() &&
         "SchedulerLimits::tokens_per_block must equal the block manager's");
}

Status Scheduler::CheckFits(SizeType prompt_len, SizeType max_new_tokens) const {
  if (prompt_len < 1) {
    return InvalidArgument("input length " + std::to_string(prompt_len) +
                           " is not accepted: must be >= 1");
  }
  if (max_new_tokens < 1) {
    return InvalidArgument("max_tokens " + std::to_string(max_new_tokens) +
                           " is not accepted: must be >= 1");
  }
  const std::int64_t total = static_cast<std::int64_t>(prompt_len) + max_new_tokens;
  if (total > limits_.max_seq_len) {
    return InvalidArgument("input length (" + std::to_string(prompt_len) + ") + max_tokens (" +
                           std::to_string(max_new_tokens) + ") = " + std::to_string(total) +
                           " exceeds max_seq_len (" + std::to_string(limits_.max_seq_len) + ")");
  }
  if (!config_.enable_chunked_context && prompt_len > limits_.max_num_tokens) {
    return InvalidArgument("input length (" + std::to_string(prompt_len) +
                           ") exceeds max_num_tokens (" + std::to_string(limits_.max_num_tokens) +
                           "); enable_chunked_context lifts this limit");
  }
  const std::int64_t num_blocks = blocks_.BlocksForTokens(total);
  if (num_blocks > blocks_.num_blocks()) {
    return InvalidArgument("input length + max_tokens = " + std::to_string(total) +
                           " tokens need " + std::to_string(num_blocks) + " KV cache blocks of " +
                           std::to_string(blocks_.tokens_per_block()) +
                           " tokens, but the cache has " + std::to_string(blocks_.num_blocks()) +
                           " blocks");
  }
  return Status::Ok();
}

void Scheduler::Enqueue(Sequence* seq) {
  assert(seq->state == SequenceState::kWaiting && seq->num_tokens() >= 1);
  assert(!blocks_.HasSequence(seq->id) && "an enqueued sequence must hold no blocks");
  seq->arrival = next_arrival_++;
  waiting_.push_back(seq);
}

SizeType Scheduler::TokensThisStep(SizeType start, SizeType remaining, SizeType budget) const {
  if (remaining <= 0 || budget <= 0) return 0;
  if (remaining <= budget) return remaining;
  if (!config_.enable_chunked_context && remaining <= limits_.max_num_tokens) return 0;
  // End the chunk on a block boundary so its blocks are full, computed and reusable after this
  // step. A budget under one block is taken whole: aligning it would halve the progress of every
  // chunk.
  const SizeType tpb = limits_.tokens_per_block;
  if (budget < tpb) return budget;
  return (start + budget) / tpb * tpb - start;  // >= 1 since budget >= tpb
}

std::int64_t Scheduler::BlocksStillNeeded(const Sequence* seq) const {
  const std::int64_t final_blocks =
      blocks_.BlocksForTokens(static_cast<std::int64_t>(seq->prompt_len) + seq->max_new_tokens);
  const auto held = static_cast<std::int64_t>(blocks_.BlockTable(seq->id).size());
  return std::max<std::int64_t>(final_blocks - held, 0);
}

ScheduleResult Scheduler::Schedule() {
  ScheduleResult result;
  SizeType budget = limits_.max_num_tokens;
  const std::size_t max_batch = MicroBatchCap();
  const bool was_idle = running_.empty() && paused_.empty();

  // 1. Running sequences, oldest first; one-token decodes before prompt chunks. Those in flight
  // belong to an earlier micro-batch.
  std::vector<Sequence*> order;
  order.reserve(running_.size());
  for (Sequence* s : running_) {
    if (Schedulable(*s)) order.push_back(s);
  }
  std::stable_partition(order.begin(), order.end(),
                        [](const Sequence* s) { return s->NumTokensToCompute() == 1; });
  for (Sequence* seq : order) {
    if (seq->state != SequenceState::kRunning)
      continue;  // paused below to make room for an older one
    if (result.items.size() >= max_batch || budget == 0) break;
    const SizeType n = TokensThisStep(seq->num_computed_tokens, seq->NumTokensToCompute(), budget);
    if (n == 0) continue;
    bool has_room = true;
    while (!blocks_.EnsureCapacity(seq->id, seq->num_computed_tokens + n)) {
      if (config_.policy == CapacitySchedulerPolicy::kGuaranteedNoEvict) {
        // Admission reserved these blocks; reaching here is a bookkeeping bug, not a full cache.
        LOG_ERROR(
            "guaranteed_no_evict: sequence {} found no block for {} tokens; skipping it this step",
            seq->id, seq->num_computed_tokens + n);
        has_room = false;
        break;
      }
      Sequence* victim = PauseVictim();
      if (victim == nullptr) {  // every other running sequence is in flight: wait for them
        has_room = false;
        break;
      }
      Pause(victim, budget, result);
      if (victim == seq) {
        has_room = false;
        break;
      }
    }
    if (!has_room) continue;
    AddItem(seq, n, result);
    budget -= n;
  }

  // NOTE: a step that had to pause has no blocks to spare; admitting would only pause again.
  bool admit = result.paused.empty();
  std::optional<std::int64_t> reserved;
  // 2. Paused sequences, oldest first. 3. New ones, only when no paused sequence waits.
  while (admit && !paused_.empty()) admit = TryAdmit(paused_.front(), budget, result, reserved);
  if (batching_type_ == BatchingType::kStatic && !was_idle) admit = false;
  while (admit && !waiting_.empty()) admit = TryAdmit(waiting_.front(), budget, result, reserved);

  for (const ScheduledItem& item : result.items) ++item.seq->steps_in_flight;

  ScheduleStats& st = result.stats;
  st.num_waiting = num_waiting();
  st.num_running = num_running();
  st.num_paused = num_paused();
  st.num_scheduled = static_cast<std::int64_t>(result.items.size());
  for (const ScheduledItem& item : result.items) {
    if (item.is_context) {
      ++st.num_context;
      st.num_context_tokens += item.num_tokens;
    }
  }
  st.num_generation = st.num_scheduled - st.num_context;
  st.num_paused_now = static_cast<std::int64_t>(result.paused.size());
  return result;
}

bool Scheduler::TryAdmit(Sequence* seq, SizeType& budget, ScheduleResult& result,
                         std::optional<std::int64_t>& reserved) {
  const auto max_running = static_cast<std::size_t>(limits_.max_batch_size);
  if (running_.size() >= max_running || result.items.size() >= MicroBatchCap() || budget <= 0) {
    return false;
  }
  std::span<const TokenIdType> tokens(seq->tokens);
  // Context logits need every prompt row, so the first pass over the prompt computes it all.
  const bool reuse = !(seq->return_context_logits && seq->num_generated() == 0);
  const kv_cache::PrefixMatch match = reuse ? blocks_.MatchPrefix(tokens) : kv_cache::PrefixMatch{};
  const SizeType start = match.num_blocks * limits_.tokens_per_block;
  const SizeType n = TokensThisStep(start, seq->num_tokens() - start, budget);
  if (n == 0) return false;
  const bool no_evict = config_.policy == CapacitySchedulerPolicy::kGuaranteedNoEvict;
  if (no_evict) {
    if (!reserved) {
      reserved = 0;
      for (const Sequence* s : running_) *reserved += BlocksStillNeeded(s);
    }
    // Blocks shared with running sequences cost nothing; matched cached blocks leave the free
    // count.
    const std::int64_t need =
        blocks_.BlocksForTokens(static_cast<std::int64_t>(seq->prompt_len) + seq->max_new_tokens) -
        match.num_blocks_in_use;
    if (*reserved + need > blocks_.NumFreeBlocks()) return false;
  }
  const std::optional<std::int32_t> reused = blocks_.AllocatePrompt(seq->id, tokens, reuse);
  if (!reused) return false;
  assert(*reused == start);
  if (no_evict) *reserved += BlocksStillNeeded(seq);

  if (seq->state == SequenceState::kPaused) {
    EraseValue(paused_, seq);
  } else {
    EraseValue(waiting_, seq);
  }
  seq->num_computed_tokens = *reused;
  seq->state = SequenceState::kRunning;
  InsertByArrival(running_, seq);
  AddItem(seq, n, result);
  budget -= n;
  return true;
}

std::size_t Scheduler::MicroBatchCap() const {
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  const std::int64_t depth = limits_.max_micro_batches;
  if (depth == 1) return static_cast<std::size_t>(limits_.max_batch_size);
  const std::int64_t sequences = num_running() + num_paused() + num_waiting();
  return static_cast<std::size_t>(std::min(ceil_div(limits_.max_batch_size, depth),
                                           std::max<std::int64_t>(1, ceil_div(sequences, depth))));
}

Sequence* Scheduler::PauseVictim() const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (!(*it)->in_flight()) return *it;
  }
  return nullptr;
}

std::int64_t Scheduler::num_in_flight() const {
  return std::count_if(running_.begin(), running_.end(),
                       [](const Sequence* s) { return s->in_flight(); });
}

void Scheduler::AddItem(Sequence* seq, SizeType num_tokens, ScheduleResult& result) {
  // The micro-batch invariant: a sequence whose previous step is still in the pipeline has no
  // known next token yet.
  assert(Schedulable(*seq) && "a sequence may be in only one micro-batch in flight");
  ScheduledItem item;
  item.seq = seq;
  item.num_cached = seq->num_computed_tokens;
  item.num_tokens = num_tokens;
  item.is_context = seq->IsContextPhase() || num_tokens > 1;
  item.needs_sampling = item.num_cached + num_tokens == seq->num_tokens();
  if (seq->return_context_logits && seq->num_generated() == 0) {
    item.logits = SequenceStep::Logits::kAll;
  } else {
    item.logits = item.needs_sampling ? SequenceStep::Logits::kLast : SequenceStep::Logits::kNone;
  }
  result.items.push_back(item);
}

void Scheduler::Pause(Sequence* seq, SizeType& budget, ScheduleResult& result) {
  auto item = std::find_if(result.items.begin(), result.items.end(),
                           [seq](const ScheduledItem& i) { return i.seq == seq; });
  if (item != result.items.end()) {
    budget += item->num_tokens;
    result.items.erase(item);
  }
  ReleaseBlocks(seq);
  seq->num_computed_tokens = 0;
  seq->state = SequenceState::kPaused;
  ++seq->num_pauses;
  EraseValue(running_, seq);
  InsertByArrival(paused_, seq);
  result.paused.push_back(seq);
  LOG_DEBUG("paused sequence {} ({} tokens); {} running", seq->id, seq->num_tokens(),
            running_.size());
}

void Scheduler::ReleaseBlocks(Sequence* seq) {
  const kv_cache::SequenceBlockStats st = blocks_.SequenceStats(seq->id);
  seq->kv_stats.alloc_new_blocks += st.alloc_new_blocks;
  seq->kv_stats.reused_blocks += st.reused_blocks;
  seq->kv_stats.alloc_total_blocks += st.alloc_total_blocks;
  blocks_.Free(seq->id);
}

void Scheduler::InsertByArrival(std::vector<Sequence*>& list, Sequence* seq) {
  auto pos = std::upper_bound(
      list.begin(), list.end(), seq,
      [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
  list.insert(pos, seq);
}

model::StepInput Scheduler::BuildStepInput(const ScheduleResult& result) const {
  model::StepInput input;
  BuildStepInput(result, &input);
  return input;
}

void Scheduler::BuildStepInput(const ScheduleResult& result, model::StepInput* input) const {
  input->sequences.resize(result.items.size());
  for (std::size_t i = 0; i < result.items.size(); ++i) {
    const ScheduledItem& item = result.items[i];
    SequenceStep& step = input->sequences[i];
    step.seq_id = static_cast<std::int64_t>(item.seq->id);
    auto tokens = item.tokens();
    step.tokens.assign(tokens.begin(), tokens.end());
    step.num_cached = item.num_cached;
    const auto& table = blocks_.BlockTable(item.seq->id);
    const auto num_blocks = static_cast<std::size_t>(
        blocks_.BlocksForTokens(static_cast<std::int64_t>(item.num_cached) + item.num_tokens));
    assert(num_blocks <= table.size());
    step.block_table.assign(table.begin(), table.begin() + std::min(num_blocks, table.size()));
    step.logits = item.logits;
    step.device_sampling.reset();
    const bool pending =
        item.seq->token_pending && item.num_cached + item.num_tokens == item.seq->num_tokens();
    step.previous_step_row = pending ? item.seq->pending_row : -1;
  }
}

void Scheduler::LookAhead(ScheduledItem& item, std::int32_t sampled_row) {
  Sequence* seq = item.seq;
  assert(seq->state == SequenceState::kRunning && seq->steps_in_flight == 1 &&
         !seq->computed_ahead && !item.looked_ahead && seq->num_computed_tokens == item.num_cached);
  seq->num_computed_tokens = item.num_cached + item.num_tokens;
  seq->computed_ahead = true;
  item.looked_ahead = true;
  if (item.needs_sampling) {
    seq->AppendToken(Sequence::kPendingToken);
    seq->token_pending = true;
    seq->pending_row = sampled_row;
  }
}

void Scheduler::OnStepDropped(const ScheduleResult& result) {
  for (const ScheduledItem& item : result.items) {
    Sequence* seq = item.seq;
    if (seq->steps_in_flight > 0) --seq->steps_in_flight;
    if (item.looked_ahead) seq->computed_ahead = false;
  }
}

void Scheduler::OnStepComputed(const ScheduleResult& result) {
  for (const ScheduledItem& item : result.items) {
    Sequence* seq = item.seq;
    if (seq->steps_in_flight > 0) --seq->steps_in_flight;
    if (item.looked_ahead) {
      // Progress was taken at LookAhead; the tokens it covers are all known now (a placeholder
      // is the position after them).
      seq->computed_ahead = false;
      if (seq->state == SequenceState::kRunning && !seq->ending) {
        blocks_.CommitTokens(seq->id, seq->tokens, item.num_cached + item.num_tokens);
      }
      continue;
    }
    if (seq->state != SequenceState::kRunning || seq->ending ||
        seq->num_computed_tokens != item.num_cached)
      continue;
    seq->num_computed_tokens += item.num_tokens;
    blocks_.CommitTokens(seq->id, seq->tokens, seq->num_computed_tokens);
  }
}

void Scheduler::Finish(Sequence* seq) {
  if (seq->state == SequenceState::kFinished) return;
  switch (seq->state) {
    case SequenceState::kWaiting:
      EraseValue(waiting_, seq);
      break;
    case SequenceState::kRunning:
      EraseValue(running_, seq);
      break;
    case SequenceState::kPaused:
      EraseValue(paused_, seq);
      break;
    case SequenceState::kFinished:
      break;
  }
  ReleaseBlocks(seq);
  seq->steps_in_flight = 0;
  seq->computed_ahead = false;
  seq->state = SequenceState::kFinished;
}

}  // namespace inflight::executor
