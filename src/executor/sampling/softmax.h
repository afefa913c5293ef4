// Softmax pieces of the CPU reference. Sums run in double so the reference is the accurate side of
// any comparison with a float kernel. -inf logits are masked tokens and get probability exactly 0.
#pragma once

#include <span>

namespace inflight::sampling {

// log(sum_i exp(logits[i])); -inf when every logit is -inf or the span is empty.
// Precondition: no NaN and no +inf (the sampler checks first).
double LogSumExp(std::span<const float> logits);

// probs[i] = exp(logits[i] - LogSumExp(logits)). Precondition: probs.size() == logits.size() and at
// least one finite logit.
void Softmax(std::span<const float> logits, std::span<double> probs);

}  // namespace inflight::sampling
