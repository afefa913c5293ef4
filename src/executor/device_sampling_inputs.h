// The executor's side of device sampling (model/model_runner.h): which requests the runner may
// sample, and the small per-step inputs that replace the host's logits processors, built from what
// the host already knows about the sequence.
//
//   request ──► DeviceSamplingInputs (one per running request, kept across steps)
//                 penalties: distinct tokens of prompt ++ generated with generated counts,
//                            updated with the tokens appended since the last step
//                 bans:      bad-word matches and the min_tokens end_id ban of this step
//                 bias:      one shared copy, the same handle every step (the runner caches it)
//               ──Next()──► model::DeviceSampling of this step (consumes one Philox draw)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "executor/sampling/sampler.h"
#include "inflight/executor.h"
#include "inflight/types.h"
#include "model/model_runner.h"

namespace inflight::executor {

// Whether the runner may sample the request's tokens from kLast rows: every sampling feature is on
// the device; only beam search and return_generation_logits (the client wants the rows) are not.
bool DeviceSamplingEligible(const Request& request);

// The distinct tokens of (prompt ++) generated, each with how often it was generated, in order of
// first appearance: what the penalties of logits_processors.h read, without a sort per step.
class PenaltyTokens {
 public:
  // include_prompt: the repetition penalty is on, so prompt tokens count too (with count 0 unless
  // generated).
  explicit PenaltyTokens(bool include_prompt) : include_prompt_(include_prompt) {}
  // Brings the table up to date: the prompt once, then the tokens of `generated` not seen yet.
  // `generated` only grows between calls; a shorter one (a different sequence) rebuilds the table.
  void Update(std::span<const TokenIdType> prompt, std::span<const TokenIdType> generated);
  const std::vector<TokenIdType>& tokens() const { return tokens_; }
  const std::vector<std::int32_t>& counts() const { return counts_; }

 private:
  void Add(TokenIdType token, std::int32_t count);

  bool include_prompt_;
  bool has_prompt_ = false;
  std::size_t num_generated_seen_ = 0;
  std::unordered_map<TokenIdType, std::size_t> index_;  // token -> position in tokens_
  std::vector<TokenIdType> tokens_;
  std::vector<std::int32_t> counts_;
};

// The ids ApplyLogitsProcessors sets to -inf at this step (bad words, min_tokens' end_id ban),
// sorted, each once.
std::vector<TokenIdType> BannedTokens(const Request& request, std::span<const TokenIdType> prompt,
                                      std::span<const TokenIdType> generated,
                                      std::int64_t vocab_size);

// One request's device-sampling inputs across its steps.
class DeviceSamplingInputs {
 public:
  // Copies the embedding bias once (the runner keys its device copy on this object's handle).
  explicit DeviceSamplingInputs(const Request& request);
  // The DeviceSampling for the token after prompt ++ generated. Takes one draw from `sampler`, as
  // every sampling::Sample call does.
  model::DeviceSampling Next(const Request& request, std::span<const TokenIdType> prompt,
                             std::span<const TokenIdType> generated,
                             sampling::SamplerState& sampler, std::int64_t vocab_size,
                             bool normalize_log_probs);

 private:
  std::unique_ptr<PenaltyTokens> penalties_;  // null: no penalty is on
  std::shared_ptr<const std::vector<float>> embedding_bias_;
};

}  // namespace inflight::executor
