#include "executor/sampling/token_match.h"

#include <cstddef>

namespace inflight::sampling {

bool EndsWith(std::span<const TokenIdType> head, std::span<const TokenIdType> tail,
              std::span<const TokenIdType> suffix) {
  const std::size_t total = head.size() + tail.size();
  if (suffix.size() > total) return false;
  const std::size_t start = total - suffix.size();
  for (std::size_t i = 0; i < suffix.size(); ++i) {
    const std::size_t pos = start + i;
    const TokenIdType t = pos < head.size() ? head[pos] : tail[pos - head.size()];
    if (t != suffix[i]) return false;
  }
  return true;
}

}  // namespace inflight::sampling
