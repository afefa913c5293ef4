// The engine builder's defaults that other parts of the product must know without linking the
// builder: the OpenAI routes compute an HF-folder engine's max_seq_len before the backend has built
// it, and must get the builder's answer.
#pragma once

#include <cstdint>

namespace inflight::model {

// max_seq_len, when not given: min(max_position_embeddings, this).
constexpr std::int32_t kDefaultMaxSeqLenCap = 2048;
// max_input_len, when not given: min(max_seq_len, this).
constexpr std::int32_t kDefaultMaxInputLenCap = 1024;

}  // namespace inflight::model
