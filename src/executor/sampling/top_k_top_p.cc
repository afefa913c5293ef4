#include "executor/sampling/top_k_top_p.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "executor/sampling/softmax.h"

namespace inflight::sampling {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

bool IsMasked(float l) {
  return std::isinf(l) && l < 0.0f;
}

// The order of the header: larger logit first, equal logits by lower id. A strict total order, so
// any selection algorithm gives the same kept set.
struct MoreProbable {
  std::span<const float> logits;
  bool operator()(TokenIdType a, TokenIdType b) const {
    const float la = logits[static_cast<std::size_t>(a)];
    const float lb = logits[static_cast<std::size_t>(b)];
    return la != lb ? la > lb : a < b;
  }
};

std::vector<TokenIdType> Unmasked(std::span<const float> logits) {
  std::vector<TokenIdType> ids;
  ids.reserve(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (!IsMasked(logits[i])) ids.push_back(static_cast<TokenIdType>(i));
  }
  return ids;
}

// Masks every token of `ranked` past the first num_keep.
void KeepPrefix(std::span<float> logits, const std::vector<TokenIdType>& ranked,
                std::size_t num_keep) {
  for (std::size_t r = num_keep; r < ranked.size(); ++r) {
    logits[static_cast<std::size_t>(ranked[r])] = kMasked;
  }
}

}  // namespace

void ApplyTopKMask(std::span<float> logits, SizeType top_k) {
  if (top_k <= 0) return;
  std::vector<TokenIdType> ids = Unmasked(logits);
  const auto num_keep = static_cast<std::size_t>(top_k);
  if (num_keep >= ids.size()) return;
  // Linear time: only the boundary between kept and masked matters, not the order inside.
  std::nth_element(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(num_keep), ids.end(),
                   MoreProbable{logits});
  KeepPrefix(logits, ids, num_keep);
}

void ApplyTopPMask(std::span<float> logits, float top_p) {
  if (top_p <= 0.0f || top_p >= 1.0f) return;
  std::vector<TokenIdType> ranked = Unmasked(logits);
  if (ranked.empty()) return;
  std::sort(ranked.begin(), ranked.end(), MoreProbable{logits});
  const double lse = LogSumExp(logits);
  double cumulative = 0.0;
  std::size_t num_keep = 0;
  while (num_keep < ranked.size()) {
    cumulative +=
        std::exp(static_cast<double>(logits[static_cast<std::size_t>(ranked[num_keep])]) - lse);
    ++num_keep;
    if (cumulative >= static_cast<double>(top_p)) break;
  }
  KeepPrefix(logits, ranked, num_keep);
}

void ApplyTopKTopPMask(std::span<float> logits, SizeType top_k, float top_p) {
  ApplyTopKMask(logits, top_k);
  ApplyTopPMask(logits, top_p);
}

}  // namespace inflight::sampling
