#include "executor/device_sampling_inputs.h"

#include <algorithm>

#include "executor/sampling/logits_processors.h"

namespace inflight::executor {

bool DeviceSamplingEligible(const Request& request) {
  return request.sampling_config.beam_width == 1 && !request.output_config.return_generation_logits;
}

void PenaltyTokens::Add(TokenIdType token, std::int32_t count) {
  const auto [it, inserted] = index_.try_emplace(token, tokens_.size());
  if (inserted) {
    tokens_.push_back(token);
    counts_.push_back(count);
  } else {
    counts_[it->second] += count;
  }
}

void PenaltyTokens::Update(std::span<const TokenIdType> prompt,
                           std::span<const TokenIdType> generated) {
  if (generated.size() < num_generated_seen_) {
    *this = PenaltyTokens(include_prompt_);
  }
  if (include_prompt_ && !has_prompt_) {
    for (TokenIdType t : prompt) Add(t, 0);
  }
  has_prompt_ = true;
  for (std::size_t i = num_generated_seen_; i < generated.size(); ++i) Add(generated[i], 1);
  num_generated_seen_ = generated.size();
}

std::vector<TokenIdType> BannedTokens(const Request& request, std::span<const TokenIdType> prompt,
                                      std::span<const TokenIdType> generated,
                                      std::int64_t vocab_size) {
  const auto vocab = static_cast<std::size_t>(vocab_size);
  std::vector<TokenIdType> banned =
      sampling::BadWordBans(request.bad_words, prompt, generated, vocab);
  if (sampling::MinTokensBansEndId(static_cast<SizeType>(generated.size()),
                                   request.sampling_config.min_tokens.value_or(0), request.end_id,
                                   vocab)) {
    banned.push_back(*request.end_id);
  }
  std::sort(banned.begin(), banned.end());
  banned.erase(std::unique(banned.begin(), banned.end()), banned.end());
  return banned;
}

DeviceSamplingInputs::DeviceSamplingInputs(const Request& request) {
  const SamplingConfig& c = request.sampling_config;
  if (c.repetition_penalty.value_or(1.0f) != 1.0f || c.presence_penalty.value_or(0.0f) != 0.0f ||
      c.frequency_penalty.value_or(0.0f) != 0.0f) {
    penalties_ = std::make_unique<PenaltyTokens>(c.repetition_penalty.value_or(1.0f) != 1.0f);
  }
  if (request.embedding_bias && !request.embedding_bias->empty()) {
    embedding_bias_ = std::make_shared<const std::vector<float>>(*request.embedding_bias);
  }
}

model::DeviceSampling DeviceSamplingInputs::Next(const Request& request,
                                                 std::span<const TokenIdType> prompt,
                                                 std::span<const TokenIdType> generated,
                                                 sampling::SamplerState& sampler,
                                                 std::int64_t vocab_size,
                                                 bool normalize_log_probs) {
  const SamplingConfig& c = request.sampling_config;
  model::DeviceSampling d;
  d.greedy = c.IsGreedy();
  d.temperature = c.temperature.value_or(1.0f);
  d.top_k = c.top_k.value_or(0);
  d.top_p = c.top_p.value_or(0.0f);
  d.seed = sampler.seed();
  d.draw_index = sampler.num_draws();
  sampler.SkipDraw();  // every Sample call takes one draw, greedy included
  d.repetition_penalty = c.repetition_penalty.value_or(1.0f);
  d.presence_penalty = c.presence_penalty.value_or(0.0f);
  d.frequency_penalty = c.frequency_penalty.value_or(0.0f);
  if (penalties_) {
    penalties_->Update(prompt, generated);
    d.penalty_tokens = penalties_->tokens();
    d.penalty_counts = penalties_->counts();
  }
  d.banned_tokens = BannedTokens(request, prompt, generated, vocab_size);
  d.embedding_bias = embedding_bias_;
  d.normalize_log_probs = normalize_log_probs;
  return d;
}

}  // namespace inflight::executor
