#include "executor/sampling/softmax.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <limits>

namespace inflight::sampling {

double LogSumExp(std::span<const float> logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  if (std::isinf(max) && max < 0) return max;
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  return max + std::log(sum);
}

void Softmax(std::span<const float> logits, std::span<double> probs) {
  assert(probs.size() == logits.size());
  const double lse = LogSumExp(logits);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    probs[i] = std::exp(static_cast<double>(logits[i]) - lse);
  }
}

}  // namespace inflight::sampling
