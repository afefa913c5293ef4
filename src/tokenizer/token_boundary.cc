#include "tokenizer/token_boundary.h"

#include "tokenizer/stream_decoder.h"

namespace inflight::tokenizer {

size_t TokenBoundary::Push(std::span<const int32_t> ids) {
  held_ids_.insert(held_ids_.end(), ids.begin(), ids.end());
  // Bytes of the held ids in both views, and where each id ends in them.
  std::string kept, skipped;
  std::vector<size_t> kept_end, skipped_end;
  for (int32_t id : held_ids_) {
    auto with_special = tokenizer_.DecodeBytes(std::span<const int32_t>(&id, 1), false);
    auto without_special = tokenizer_.DecodeBytes(std::span<const int32_t>(&id, 1), true);
    if (!with_special.ok() || !without_special.ok()) {
      const size_t all = held_ids_.size();
      held_ids_.clear();
      return all;
    }
    kept += *with_special;
    skipped += *without_special;
    kept_end.push_back(kept.size());
    skipped_end.push_back(skipped.size());
  }
  const bool spaces = tokenizer_.cleans_up_spaces();
  // The last id whose end is a settled cut in both views (the ids before the first held one
  // ended on a settled cut, as SettledLength requires).
  size_t release = 0;
  for (size_t k = held_ids_.size(); k > 0; --k) {
    const size_t ke = kept_end[k - 1], se = skipped_end[k - 1];
    if (SettledLength(std::string_view(kept).substr(0, ke), spaces) == ke &&
        SettledLength(std::string_view(skipped).substr(0, se), spaces) == se) {
      release = k;
      break;
    }
  }
  held_ids_.erase(held_ids_.begin(), held_ids_.begin() + static_cast<std::ptrdiff_t>(release));
  return release;
}

}  // namespace inflight::tokenizer
