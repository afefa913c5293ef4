#include "quant_quality_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace inflight::bench {

void LogSoftmax(const float* row, std::int64_t n, std::vector<double>* out) {
  out->resize(static_cast<std::size_t>(n));
  double max = -std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(row[i]));
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
  const double log_z = max + std::log(sum);
  for (std::int64_t i = 0; i < n; ++i) {
    (*out)[static_cast<std::size_t>(i)] = static_cast<double>(row[i]) - log_z;
  }
}

std::int64_t ArgMax(const float* row, std::int64_t n) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

double KlDivergence(const std::vector<double>& log_p, const std::vector<double>& log_q) {
  double kl = 0;
  for (std::size_t i = 0; i < log_p.size(); ++i) {
    if (std::isnan(log_p[i]) || std::isnan(log_q[i]))
      return std::numeric_limits<double>::quiet_NaN();
    const double p = std::exp(log_p[i]);
    if (p == 0) continue;
    kl += p * (log_p[i] - log_q[i]);  // log_q == -inf gives +inf, as it should
  }
  // Rounding can leave a sum of tiny terms just below zero for equal rows; KL is never negative.
  return std::max(kl, 0.0);
}

double Entropy(const std::vector<double>& log_p) {
  double h = 0;
  for (double lp : log_p) {
    const double p = std::exp(lp);
    if (p > 0) h -= p * lp;
  }
  return h;
}

void QualityStats::AddPosition(const float* reference, const float* candidate, std::int64_t vocab) {
  LogSoftmax(reference, vocab, &log_p_);
  LogSoftmax(candidate, vocab, &log_q_);
  const double kl = KlDivergence(log_p_, log_q_);
  ++positions_;
  if (ArgMax(reference, vocab) == ArgMax(candidate, vocab)) ++top1_equal_;
  kl_sum_ += kl;
  // A NaN must show in the max too (std::max would drop it).
  if (std::isnan(kl) || std::isnan(max_kl_)) {
    max_kl_ = std::numeric_limits<double>::quiet_NaN();
  } else {
    max_kl_ = std::max(max_kl_, kl);
  }
  entropy_sum_ += Entropy(log_p_);
}

void QualityStats::AddContinuation(const std::vector<std::int32_t>& reference,
                                   const std::vector<std::int32_t>& candidate) {
  if (reference.empty()) return;
  std::size_t same = 0;
  while (same < reference.size() && same < candidate.size() && reference[same] == candidate[same]) {
    ++same;
  }
  ++continuations_;
  prefix_fraction_sum_ += static_cast<double>(same) / static_cast<double>(reference.size());
  if (same == reference.size() && candidate.size() == reference.size()) ++identical_;
}

double QualityStats::top1_agreement() const {
  return positions_ ? static_cast<double>(top1_equal_) / static_cast<double>(positions_) : 0.0;
}

double QualityStats::mean_kl() const {
  return positions_ ? kl_sum_ / static_cast<double>(positions_) : 0.0;
}

double QualityStats::greedy_prefix_fraction() const {
  return continuations_ ? prefix_fraction_sum_ / static_cast<double>(continuations_) : 0.0;
}

double QualityStats::identical_continuations() const {
  return continuations_ ? static_cast<double>(identical_) / static_cast<double>(continuations_)
                        : 0.0;
}

double QualityStats::mean_reference_entropy() const {
  return positions_ ? entropy_sum_ / static_cast<double>(positions_) : 0.0;
}

}  // namespace inflight::bench
