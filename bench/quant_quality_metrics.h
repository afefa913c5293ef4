// How far a candidate engine's next-token distributions are from a reference engine's: top-1
// agreement, KL(reference || candidate) in nats, and how long greedy continuations stay equal.
// All arithmetic in double, from the fp32 logits rows the runners return.
#pragma once

#include <cstdint>
#include <vector>

namespace inflight::bench {

// log_softmax(row) in double: row[i] - max - log(sum(exp(row - max))).
void LogSoftmax(const float* row, std::int64_t n, std::vector<double>* out);

// The index of the largest value, the lowest one on ties (the greedy sampler's rule).
std::int64_t ArgMax(const float* row, std::int64_t n);

// KL(P || Q) = sum_i p_i (log p_i - log q_i) from log-probabilities; terms with p_i == 0 add
// nothing; +inf when some p_i > 0 has q_i == 0; NaN when either row holds NaN.
double KlDivergence(const std::vector<double>& log_p, const std::vector<double>& log_q);

// Entropy -sum p log p of a log-probability row (the scale a KL figure is read against).
double Entropy(const std::vector<double>& log_p);

// Sums over every compared position and prompt of one candidate.
class QualityStats {
 public:
  // One position: the reference's and the candidate's logits rows of `vocab` values.
  void AddPosition(const float* reference, const float* candidate, std::int64_t vocab);
  // One prompt's greedy continuations (same length, each engine's own argmax fed back).
  void AddContinuation(const std::vector<std::int32_t>& reference,
                       const std::vector<std::int32_t>& candidate);

  std::int64_t positions() const { return positions_; }
  double top1_agreement() const;  // fraction of positions with the same argmax
  double mean_kl() const;
  double max_kl() const { return max_kl_; }
  // Mean over prompts of (tokens before the first difference) / G; 1 when all are identical.
  double greedy_prefix_fraction() const;
  double identical_continuations() const;  // fraction of prompts whose G tokens are all equal
  std::int64_t continuations() const { return continuations_; }
  double mean_reference_entropy() const;

 private:
  std::vector<double> log_p_, log_q_;  // scratch rows
  std::int64_t positions_ = 0;
  std::int64_t top1_equal_ = 0;
  double kl_sum_ = 0;
  double max_kl_ = 0;
  double entropy_sum_ = 0;
  std::int64_t continuations_ = 0;
  double prefix_fraction_sum_ = 0;
  std::int64_t identical_ = 0;
};

}  // namespace inflight::bench
