// Turns one sequence's logits row into its next token and that token's log-probability.
//
// Per step, for each running sequence, the executor calls
//   Sample(row, request.sampling_config, MakeDecodeContext(request, generated), state,
//          executor_config.normalize_log_probs)
// then EvaluateStep (stop_criteria.h) to decide whether the token is appended and whether the
// sequence finished.
//
//   logits ──ApplyLogitsProcessors──► processed ──ApplyTopKTopPMask──► truncated ──draw──► token
//                                        │                                 │
//           log-prob, normalize off ◄────┘   log-prob, normalize on ◄──────┘
//           (and always for greedy)
#pragma once

#include <cstdint>
#include <span>

#include "executor/sampling/decode_context.h"
#include "inflight/executor.h"
#include "inflight/status.h"
#include "inflight/types.h"

namespace inflight::sampling {

// The random stream of one request: draw n is PhiloxUniform(seed, n) (philox.h), n counting this
// request's Sample calls. Nothing is shared between requests, so a request's tokens do not depend
// on which other requests share its batch, on pauses, or on the order the executor visits
// sequences. A GPU kernel reproduces draw n from (seed, n) with no state: n is the number of tokens
// sampled so far for the sequence.
class SamplerState {
 public:
  explicit SamplerState(std::uint64_t seed = 0) : seed_(seed) {}
  static SamplerState FromConfig(const SamplingConfig& config) {
    return SamplerState(config.seed.value_or(0));
  }

  // Uniform in [0, 1); advances the stream.
  double NextUniform();
  // Advances the stream past the draw NextUniform would return, without computing it: the device
  // sampler computes that draw itself from seed() and num_draws().
  void SkipDraw() { ++num_draws_; }
  std::uint64_t seed() const { return seed_; }
  std::uint64_t num_draws() const { return num_draws_; }

 private:
  std::uint64_t seed_;
  std::uint64_t num_draws_ = 0;
};

struct SampleResult {
  TokenIdType token = 0;
  float log_prob = 0.0f;  // natural log; see Sample for which distribution
};

// Greedy (config.IsGreedy()): the argmax of the processed logits, lowest id on ties.
// Otherwise: a draw from softmax(processed logits after ApplyTopKTopPMask), by inverse CDF in
// ascending token-id order with one uniform from `state`.
//
// log_prob of the chosen token:
//   greedy                         log-softmax of the processed logits (no truncation)
//   sampled, normalize_log_probs   log of its probability in the distribution actually sampled
//                                  from (after penalties, temperature, top-k/top-p renormalisation)
//   sampled, !normalize_log_probs  log-softmax of the processed logits before top-k/top-p
// NOTE: NVIDIA's backend returns 0 for greedy (it runs top-k 1, whose renormalised probability is
// 1; tensorrtllm_backend's FAQ; issues #58, #276, #291 are users asking why). We return the real
// log-softmax on purpose.
//
// `logits` (vocab_size entries, fp32) is rewritten in place: afterwards it holds the processed and,
// when sampling, truncated logits. Copy the row first if the raw logits are to be returned.
// Every call advances `state` by one draw, greedy included, so draw n always belongs to token n.
// Errors (kInternal) when the row has a NaN or +inf after processing, or every token is banned.
Result<SampleResult> Sample(std::span<float> logits, const SamplingConfig& config,
                            const DecodeContext& ctx, SamplerState& state,
                            bool normalize_log_probs);

// The draw alone: the token at which the cumulative sum of softmax(logits), in ascending id order,
// first exceeds u * total. A token with probability 0 is never returned.
// Preconditions: u in [0, 1); at least one finite logit, none NaN or +inf.
TokenIdType DrawFromLogits(std::span<const float> logits, double u);

// Argmax, lowest id on ties. Precondition: logits non-empty, no NaN.
TokenIdType Argmax(std::span<const float> logits);

}  // namespace inflight::sampling
