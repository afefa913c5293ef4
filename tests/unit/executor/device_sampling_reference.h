// What a runner with device sampling computes for one row (kernels/cuda/sampling.h, SampleRows),
// on the CPU and from the DeviceSampling alone: the penalty and ban lists replace the request's
// history and words, so checking this against the host sampler checks the lists the executor
// builds. Same float operations as the kernel (and ApplyLogitsProcessors); then the host sampler's
// selection rules.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "executor/sampling/logits_processors.h"
#include "executor/sampling/philox.h"
#include "executor/sampling/sampler.h"
#include "executor/sampling/softmax.h"
#include "executor/sampling/top_k_top_p.h"
#include "model/model_runner.h"

namespace inflight::testing {

// The row after the logits processors, as DeviceSampling describes them.
inline void ApplyDeviceProcessors(std::span<float> row, const model::DeviceSampling& d) {
  if (d.embedding_bias) sampling::ApplyEmbeddingBias(row, *d.embedding_bias);
  if (d.temperature > 0.0f && d.temperature != 1.0f) sampling::ApplyTemperature(row, d.temperature);
  const auto in_vocab = [&](TokenIdType t) {
    return t >= 0 && static_cast<std::size_t>(t) < row.size();
  };
  for (std::size_t j = 0; j < d.penalty_tokens.size(); ++j) {
    const TokenIdType t = d.penalty_tokens[j];
    if (!in_vocab(t)) continue;
    float& l = row[static_cast<std::size_t>(t)];
    if (d.repetition_penalty != 1.0f) {
      l = l > 0.0f ? l / d.repetition_penalty : l * d.repetition_penalty;
    }
    const std::int32_t generated = d.penalty_counts[j];
    if (generated > 0) {
      if (d.presence_penalty != 0.0f) l -= d.presence_penalty;
      if (d.frequency_penalty != 0.0f) l -= static_cast<float>(generated) * d.frequency_penalty;
    }
  }
  for (TokenIdType t : d.banned_tokens) {
    if (in_vocab(t)) row[static_cast<std::size_t>(t)] = -std::numeric_limits<float>::infinity();
  }
}

struct DeviceSampled {
  TokenIdType token = 0;  // or StepOutput::kSampledNotFinite / kSampledAllBanned
  float log_prob = 0.0f;
};

// The token and log-probability SampleRows returns for `row` under `d`.
inline DeviceSampled SampleLikeDevice(std::vector<float> row, const model::DeviceSampling& d) {
  ApplyDeviceProcessors(row, d);
  DeviceSampled out;
  bool any_finite = false;
  for (float l : row) {
    if (std::isnan(l) || (std::isinf(l) && l > 0.0f)) {
      return {model::StepOutput::kSampledNotFinite, std::numeric_limits<float>::quiet_NaN()};
    }
    any_finite = any_finite || !std::isinf(l);
  }
  if (!any_finite) {
    return {model::StepOutput::kSampledAllBanned, std::numeric_limits<float>::quiet_NaN()};
  }
  const double processed_lse = sampling::LogSumExp(row);
  if (d.greedy) {
    out.token = sampling::Argmax(row);
    out.log_prob = static_cast<float>(row[static_cast<std::size_t>(out.token)] - processed_lse);
    return out;
  }
  sampling::ApplyTopKTopPMask(row, d.top_k, d.top_p);
  out.token = sampling::DrawFromLogits(row, sampling::PhiloxUniform(d.seed, d.draw_index));
  const double lse = d.normalize_log_probs ? sampling::LogSumExp(row) : processed_lse;
  out.log_prob = static_cast<float>(row[static_cast<std::size_t>(out.token)] - lse);
  return out;
}

}  // namespace inflight::testing
