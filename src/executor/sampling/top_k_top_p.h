// Exact top-k and top-p masks on one logits row. A masked token gets -inf; the distribution sampled
// from is the softmax of what is left, which renormalises over the kept tokens.
//
// Order of tokens: larger logit first; equal logits by lower token id first. Both masks use it, so
// ties are resolved the same way everywhere.
#pragma once

#include <span>

#include "inflight/types.h"

namespace inflight::sampling {

// Keeps the top_k largest logits. top_k <= 0 or >= the number of unmasked tokens: no-op.
void ApplyTopKMask(std::span<float> logits, SizeType top_k);

// Keeps the smallest set of most probable tokens whose probabilities (the softmax of `logits`, i.e.
// renormalised over the tokens still unmasked) add up to >= top_p; at least one token is kept.
// top_p <= 0 or >= 1: no-op. Tokens whose probability underflows to 0 are only kept when needed.
void ApplyTopPMask(std::span<float> logits, float top_p);

// TensorRT-LLM's combination: top-k first, then top-p within the renormalised top-k distribution.
void ApplyTopKTopPMask(std::span<float> logits, SizeType top_k, float top_p);

}  // namespace inflight::sampling
