// The dense embedding bias of NVIDIA's preprocessing model, built from words and weights.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace inflight::tokenizer {

// A [vocab_size] vector of zeros with weights[i] added at the first token of word i (the token
// that starts the word, so the bias makes the word more or less likely to begin). Words with no
// ids are skipped. InvalidArgument when the counts differ or an id is outside [0, vocab_size).
// NOTE: NVIDIA's Python model adds the weight at every token of the word (special tokens
// included); biasing only the first token leaves shared sub-word tokens alone.
Result<std::vector<float>> BuildEmbeddingBias(const std::vector<std::vector<int32_t>>& word_ids,
                                              std::span<const float> weights, int32_t vocab_size);

}  // namespace inflight::tokenizer
