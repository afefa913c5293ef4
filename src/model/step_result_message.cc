#include "model/step_result_message.h"

#include <bit>
#include <cstring>

namespace inflight::model {

std::size_t StepResultCount(const StepOutput& out) {
  return out.logits.size() + 2 * out.sampled_tokens.size();
}

void PackStepResult(const StepOutput& out, float* message) {
  const std::size_t num_logits = out.logits.size(), num_sampled = out.sampled_tokens.size();
  if (num_logits > 0) std::memcpy(message, out.logits.data(), num_logits * sizeof(float));
  for (std::size_t i = 0; i < num_sampled; ++i) {
    // NOTE: token ids travel as their bits: -1 (not sampled) is a NaN pattern, kept bit for bit.
    message[num_logits + i] = std::bit_cast<float>(out.sampled_tokens[i]);
    message[num_logits + num_sampled + i] =
        i < out.sampled_log_probs.size() ? out.sampled_log_probs[i] : 0.0f;
  }
}

void UnpackStepResult(const float* message, StepOutput& out) {
  const std::size_t num_logits = out.logits.size(), num_sampled = out.sampled_tokens.size();
  if (num_logits > 0) std::memcpy(out.logits.data(), message, num_logits * sizeof(float));
  out.sampled_log_probs.resize(num_sampled);
  for (std::size_t i = 0; i < num_sampled; ++i) {
    out.sampled_tokens[i] = std::bit_cast<TokenIdType>(message[num_logits + i]);
    out.sampled_log_probs[i] = message[num_logits + num_sampled + i];
  }
}

}  // namespace inflight::model
