#include "executor/sampling/word_list.h"

#include <cstddef>
#include <string>

namespace inflight::sampling {

Result<std::vector<VecTokens>> ParseWordList(std::span<const std::int32_t> flat,
                                             std::span<const std::int32_t> offsets,
                                             const char* tensor_name) {
  const std::string name(tensor_name);
  std::vector<VecTokens> words;
  std::int32_t begin = 0;
  std::size_t i = 0;
  for (; i < offsets.size() && offsets[i] != -1; ++i) {
    const std::int32_t end = offsets[i];
    const std::string where =
        name + " offset " + std::to_string(end) + " at index " + std::to_string(i);
    if (end < 0) {
      return InvalidArgument(where + " is negative: accepted offsets are >= 0, or -1 as padding");
    }
    if (end < begin) {
      return InvalidArgument(where + " is smaller than the previous offset " +
                             std::to_string(begin) + ": offsets must be non-decreasing");
    }
    if (static_cast<std::size_t>(end) > flat.size()) {
      return InvalidArgument(where + " is past the end of the " + std::to_string(flat.size()) +
                             " token ids in row 0: accepted [" + std::to_string(begin) + ", " +
                             std::to_string(flat.size()) + "]");
    }
    if (end > begin) words.emplace_back(flat.begin() + begin, flat.begin() + end);
    begin = end;
  }
  for (std::size_t pad = i; pad < offsets.size(); ++pad) {
    if (offsets[pad] != -1) {
      return InvalidArgument(name + " offset " + std::to_string(offsets[pad]) + " at index " +
                             std::to_string(pad) + " follows the padding -1 at index " +
                             std::to_string(i) + ": padding must come last");
    }
  }
  return words;
}

}  // namespace inflight::sampling
