// Per-request state shared by the scheduler and the executor.
//
// The one rule (vLLM v1 style, style.md rule 4): a sequence knows num_tokens() tokens (prompt +
// generated) and has num_computed_tokens of them in the KV cache; every step computes some of
// the rest.
//
//   tokens:  [p0 p1 ... p(prompt_len-1) g0 g1 ...]
//            [0 ..... num_computed_tokens) [num_computed_tokens ..... num_tokens())
//             K/V in the cache               still to compute (NumTokensToCompute)
//
//   prefill          num_computed = 0 (or the reused prefix): the whole prompt to compute
//   chunked prefill  a part of the rest this step, more in later steps
//   decode           exactly the one newest token to compute
//   resume           num_computed was reset to 0 by a pause: prompt + generated recomputed
//                    (the cached prefix reused)
//
// A step that computes up to the last known token yields logits; the executor samples a token.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "inflight/types.h"

namespace inflight::executor {

enum class SequenceState : std::uint8_t {
  kWaiting,   // enqueued, holds no blocks
  kRunning,   // holds blocks; scheduled every step while budget allows
  kPaused,    // max_utilization ran out of blocks: blocks freed, waits to recompute
  kFinished,  // finished or cancelled; holds no blocks; the scheduler has forgotten it
};

// KV cache use of one request, summed over every allocation (a paused and resumed request counts
// both).
struct SequenceKvStats {
  std::int64_t alloc_new_blocks = 0;
  std::int64_t reused_blocks = 0;
  std::int64_t alloc_total_blocks = 0;
};

struct Sequence {
  Sequence(IdType id_in, VecTokens prompt, SizeType max_new_tokens_in)
      : id(id_in),
        tokens(std::move(prompt)),
        prompt_len(static_cast<SizeType>(tokens.size())),
        max_new_tokens(max_new_tokens_in) {}

  IdType id = 0;
  VecTokens tokens;  // prompt followed by the generated tokens
  SizeType prompt_len = 0;
  SizeType max_new_tokens = 0;
  SizeType num_computed_tokens = 0;  // tokens whose K/V are in the cache
  SequenceState state = SequenceState::kWaiting;
  std::uint64_t arrival =
      0;  // set by Scheduler::Enqueue; smaller is older (FIFO, pause and resume order)
  // Context logits need every prompt position computed here, so the first pass over the prompt does
  // not reuse cached blocks and its steps return all rows (Logits::kAll).
  bool return_context_logits = false;
  SizeType num_pauses = 0;
  // Steps the model has not finished that compute this sequence (Scheduler::Schedule adds one,
  // OnStepComputed takes it back): its next step needs this one's token, so no other micro-batch
  // may take it, and its blocks may not be freed (paused) under the pipeline. At most one, or two
  // with lookahead (Scheduler::LookAhead).
  std::int32_t steps_in_flight = 0;
  // Lookahead: the last token is a placeholder for the token the runner samples on the device in
  // the step in flight, for that step's sequence `pending_row`; num_computed_tokens already counts
  // the step in flight, so the next step may decode the placeholder before the token is back.
  bool token_pending = false;
  std::int32_t pending_row = -1;
  // Lookahead: num_computed_tokens already counts the one step in flight (Scheduler::LookAhead),
  // so the sequence may be scheduled again before that step is back.
  bool computed_ahead = false;
  // Lookahead: finished (or failed) by the token of a step that came back while the step after it
  // still computes this sequence; that step's work for it is discarded and the executor ends the
  // request when the step is back.
  bool ending = false;
  SequenceKvStats kv_stats;  // complete once the scheduler has freed the blocks (Finish / Cancel)

  bool in_flight() const { return steps_in_flight > 0; }
  SizeType num_tokens() const { return static_cast<SizeType>(tokens.size()); }
  SizeType num_generated() const { return num_tokens() - prompt_len; }
  SizeType NumTokensToCompute() const { return num_tokens() - num_computed_tokens; }
  // Prompt (or a recompute of it) still in progress; decode otherwise.
  bool IsContextPhase() const { return num_computed_tokens < prompt_len; }
  // True once num_generated() == max_new_tokens; the executor checks end_id / stop words itself.
  bool ReachedMaxTokens() const { return num_generated() >= max_new_tokens; }
  std::span<const TokenIdType> prompt() const {
    return {tokens.data(), static_cast<std::size_t>(prompt_len)};
  }
  std::span<const TokenIdType> generated() const {
    return std::span<const TokenIdType>(tokens).subspan(static_cast<std::size_t>(prompt_len));
  }
  // Invalidates spans into `tokens` (ScheduledItem::tokens included).
  void AppendToken(TokenIdType token) { tokens.push_back(token); }
  // The generated tokens known to the host: all of them but a pending placeholder.
  std::span<const TokenIdType> known_generated() const {
    return generated().first(generated().size() - (token_pending ? 1 : 0));
  }
  // What a placeholder token holds until the runner's sampled token replaces it.
  static constexpr TokenIdType kPendingToken = -1;
};

}  // namespace inflight::executor
