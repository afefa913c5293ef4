// Lookahead: step N + 1 is launched before step N's tokens are back, so the executor's work between
// steps (taking the tokens, scheduling, building and launching the next step) overlaps the
// device's instead of leaving it idle (bench/NOTES.md, entry 24: ~3% of a decode step at 2,048
// sequences). A runner that supports it (ModelRunner::supports_lookahead) reads each continuing
// sequence's input token of step N + 1 on the device from step N's sampled ids.
//
//   host:    launch N | look ahead N, launch N+1 | complete N | look ahead N+1, launch N+2 | ...
//   device:  [ step N ][ step N+1 ][ step N+2 ] ...
//
// Looking ahead an item of step N counts its tokens as computed now (Scheduler::LookAhead); an
// item that samples gets a placeholder token, replaced when step N is back. A request that ends at
// step N (end id, stop words, a cancel, an error) while step N + 1 computes it ends when step
// N + 1 is back (EndRequest, ApplyHeldEnd), its work there discarded; an item whose token ends it
// by length is not looked ahead at all. Sequences whose next sampling reads the tokens (penalties,
// bad words) or that are sampled on the host make step N complete before the next launch.
#include <chrono>

#include "executor/executor_impl.h"

namespace inflight {

using executor::RequestState;
using executor::ScheduledItem;

namespace {

// Whether the next token's device-sampling inputs (device_sampling_inputs.h) read the values of
// the generated tokens: the penalties and bad words do; min_tokens only counts them.
bool NextSamplingReadsTokens(const Request& r) {
  const SamplingConfig& c = r.sampling_config;
  return c.repetition_penalty.value_or(1.0f) != 1.0f || c.presence_penalty.value_or(0.0f) != 0.0f ||
         c.frequency_penalty.value_or(0.0f) != 0.0f || !r.bad_words.empty();
}

}  // namespace

void Executor::Impl::RunStepAhead() {
  // A small step completes first (ModelRunner::lookahead_min_sequences), and so does one whose
  // next launch needs some of its tokens on the host.
  if (!in_flight_.empty() && (static_cast<std::int64_t>(in_flight_.back().step.items.size()) <
                                  runner_->lookahead_min_sequences() ||
                              !LookAheadStep())) {
    CompleteStep();
    return;
  }
  const bool launched = LaunchStep();
  if (in_flight_.empty()) {
    // Nothing fits this instant (blocks held by requests being finished); wait for a change.
    std::unique_lock<std::mutex> lock(mu_);
    work_cv_.wait_for(lock, std::chrono::milliseconds(5));
    return;
  }
  // One step stays queued behind the one the device runs.
  if (in_flight_.size() > 1 || !launched) CompleteStep();
}

bool Executor::Impl::LookAheadStep() {
  InFlightStep& f = in_flight_.back();
  bool all = true;
  for (std::size_t i = 0; i < f.step.items.size(); ++i) {
    ScheduledItem& item = f.step.items[i];
    if (item.looked_ahead) continue;
    const IdType id = item.seq->id;
    const executor::Sequence& seq = *item.seq;  // its request lives while it is in flight
    // Requests that end when this step is back need nothing of the next one.
    if (seq.ending || held_cancels_.count(id) > 0 || seq.steps_in_flight != 1 ||
        seq.state != executor::SequenceState::kRunning) {
      continue;
    }
    if (!item.needs_sampling) {
      scheduler_.LookAhead(item, -1);  // a prompt chunk: the next chunk needs no token
      continue;
    }
    if (seq.num_generated() + 1 >= seq.max_new_tokens) continue;  // this token ends it by length
    if (f.on_device[i] && !NextSamplingReadsTokens(states_.at(id)->request)) {
      scheduler_.LookAhead(item, static_cast<std::int32_t>(i));
      continue;
    }
    all = false;
  }
  return all;
}

void Executor::Impl::EndRequest(RequestState& s, FinishReason reason, const Status& error) {
  if (s.sequence.in_flight()) {
    s.sequence.ending = true;
    held_ends_.try_emplace(s.sequence.id, HeldEnd{reason, error});  // the first end stands
    return;
  }
  if (!error.ok()) return FailRequest(s, error);
  FinishRequest(s, reason);
}

bool Executor::Impl::ApplyHeldEnd(RequestState& s) {
  const IdType id = s.sequence.id;
  auto held = held_ends_.find(id);
  const bool cancelled = held_cancels_.count(id) > 0;
  if (held == held_ends_.end() && !cancelled) return false;
  if (s.sequence.in_flight()) {
    s.sequence.ending = true;  // the step after this one computes it still: end it then
    return true;
  }
  if (held != held_ends_.end()) {
    const HeldEnd end = held->second;
    held_ends_.erase(held);
    held_cancels_.erase(id);
    if (!end.error.ok()) {
      FailRequest(s, end.error);
    } else {
      FinishRequest(s, end.reason);
    }
    return true;
  }
  held_cancels_.erase(id);
  FinishRequest(s, FinishReason::kCancelled);  // its blocks are the model's no more
  return true;
}

}  // namespace inflight
