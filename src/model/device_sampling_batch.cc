#include "model/device_sampling_batch.h"

#include <string>

#include "executor/sampling/philox.h"

namespace inflight::model {

Status DeviceSamplingBatch::Add(const DeviceSampling& d, const float* bias) {
  if (d.penalty_tokens.size() != d.penalty_counts.size()) {
    return InvalidArgument("device sampling has " + std::to_string(d.penalty_tokens.size()) +
                           " penalty tokens but " + std::to_string(d.penalty_counts.size()) +
                           " counts: expected one count per token");
  }
  kernels::cuda::SamplingParams p;
  p.embedding_bias = bias;
  p.uniform = sampling::PhiloxUniform(d.seed, d.draw_index);
  p.temperature = d.temperature;
  p.top_p = d.top_p;
  p.repetition_penalty = d.repetition_penalty;
  p.presence_penalty = d.presence_penalty;
  p.frequency_penalty = d.frequency_penalty;
  p.top_k = d.top_k;
  const std::size_t num_pairs = d.penalty_tokens.size();
  p.penalty_offset = static_cast<std::int32_t>(lists_.size());
  p.num_penalty_tokens = static_cast<std::int32_t>(num_pairs);
  for (std::size_t j = 0; j < num_pairs; ++j) {
    lists_.push_back(d.penalty_tokens[j]);
    lists_.push_back(d.penalty_counts[j]);
  }
  p.ban_offset = static_cast<std::int32_t>(lists_.size());
  p.num_banned = static_cast<std::int32_t>(d.banned_tokens.size());
  lists_.insert(lists_.end(), d.banned_tokens.begin(), d.banned_tokens.end());
  p.greedy = d.greedy ? 1 : 0;
  p.normalize_log_prob = d.normalize_log_probs ? 1 : 0;
  params_.push_back(p);
  return Status::Ok();
}

void DeviceSamplingBatch::AddPadding() {
  kernels::cuda::SamplingParams p;
  p.greedy = 1;
  params_.push_back(p);
}

}  // namespace inflight::model
