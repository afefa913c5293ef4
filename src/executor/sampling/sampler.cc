#include "executor/sampling/sampler.h"

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "executor/sampling/logits_processors.h"
#include "executor/sampling/philox.h"
#include "executor/sampling/softmax.h"
#include "executor/sampling/top_k_top_p.h"

namespace inflight::sampling {
namespace {

// The processed row must give a proper distribution: no NaN, no +inf, something left unbanned.
Status CheckSamplable(std::span<const float> logits) {
  bool any_finite = false;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (std::isnan(l) || (std::isinf(l) && l > 0.0f)) {
      return Internal("logit of token " + std::to_string(i) + " is " +
                      (std::isnan(l) ? "nan" : "+inf") +
                      " after bias, temperature and penalties: cannot sample");
    }
    any_finite = any_finite || !std::isinf(l);
  }
  if (!any_finite) {
    return Internal("every token of the vocabulary (" + std::to_string(logits.size()) +
                    ") is banned (bad words, min_tokens or -inf logits): cannot sample");
  }
  return Status::Ok();
}

}  // namespace

double SamplerState::NextUniform() {
  return PhiloxUniform(seed_, num_draws_++);
}

TokenIdType Argmax(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<TokenIdType>(best);
}

TokenIdType DrawFromLogits(std::span<const float> logits, double u) {
  std::vector<double> probs(logits.size());
  Softmax(logits, probs);
  double total = 0.0;
  for (double p : probs) total += p;
  const double target = u * total;
  double cumulative = 0.0;
  std::size_t last_nonzero = 0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0) continue;
    cumulative += probs[i];
    last_nonzero = i;
    if (target < cumulative) return static_cast<TokenIdType>(i);
  }
  // Only reachable through rounding when u is within an ulp of 1.
  return static_cast<TokenIdType>(last_nonzero);
}

Result<SampleResult> Sample(std::span<float> logits, const SamplingConfig& config,
                            const DecodeContext& ctx, SamplerState& state,
                            bool normalize_log_probs) {
  const double u = state.NextUniform();
  ApplyLogitsProcessors(logits, config, ctx);
  RETURN_IF_ERROR(CheckSamplable(logits));
  const double processed_lse = LogSumExp(logits);

  SampleResult result;
  if (config.IsGreedy()) {
    result.token = Argmax(logits);
    result.log_prob =
        static_cast<float>(logits[static_cast<std::size_t>(result.token)] - processed_lse);
    return result;
  }

  ApplyTopKTopPMask(logits, config.top_k.value_or(0), config.top_p.value_or(0.0f));
  result.token = DrawFromLogits(logits, u);
  const double chosen = logits[static_cast<std::size_t>(result.token)];
  const double lse = normalize_log_probs ? LogSumExp(logits) : processed_lse;
  result.log_prob = static_cast<float>(chosen - lse);
  return result;
}

}  // namespace inflight::sampling
