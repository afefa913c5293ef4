#include "tokenizer/embedding_bias.h"

#include <string>

namespace inflight::tokenizer {

Result<std::vector<float>> BuildEmbeddingBias(const std::vector<std::vector<int32_t>>& word_ids,
                                              std::span<const float> weights, int32_t vocab_size) {
  if (word_ids.size() != weights.size()) {
    return InvalidArgument("embedding bias has " + std::to_string(word_ids.size()) + " words but " +
                           std::to_string(weights.size()) +
                           " weights; each word needs exactly one weight");
  }
  if (vocab_size <= 0) {
    return InvalidArgument("vocab_size " + std::to_string(vocab_size) + " must be positive");
  }
  std::vector<float> bias(static_cast<size_t>(vocab_size), 0.0f);
  for (size_t i = 0; i < word_ids.size(); ++i) {
    if (word_ids[i].empty()) continue;
    const int32_t id = word_ids[i].front();
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument("embedding bias word " + std::to_string(i) + " starts with token id " +
                             std::to_string(id) + ", outside the vocabulary [0, " +
                             std::to_string(vocab_size) + ")");
    }
    bias[static_cast<size_t>(id)] += weights[i];
  }
  return bias;
}

}  // namespace inflight::tokenizer
