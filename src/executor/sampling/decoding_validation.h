// Checks the decoding fields of a Request against the model's vocabulary before it is queued, so
// that the sampler never sees an id it cannot index.
#pragma once

#include <cstdint>

#include "inflight/executor.h"
#include "inflight/status.h"

namespace inflight::sampling {

// SamplingConfig::Validate(), then: top_k <= vocab_size; end_id, pad_id and every id of stop_words
// and bad_words in [0, vocab_size); no empty stop or bad word; embedding_bias of exactly vocab_size
// values, none NaN or +inf; num_return_sequences 1. Messages name the field, the value and the
// accepted range. Does not check input_token_ids or max_tokens (the executor's own validation
// does).
Status ValidateDecodingInputs(const Request& request, std::int64_t vocab_size);

}  // namespace inflight::sampling
