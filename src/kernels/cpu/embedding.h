// Token embedding gather, plus learned absolute positions (GPT-2).
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_ptr.h"

namespace inflight::kernels::cpu {

// out[t] = table[token_ids[t]] (+ pos_table[positions[t]] when pos_table is present), rows of
// `hidden`. table: [vocab, hidden]; pos_table: [max_positions, hidden]. Ids and positions must be
// in range: the caller validates them (this is a kernel, not an input check).
void EmbeddingGather(float* out, const std::int32_t* token_ids, std::int64_t num_tokens,
                     WeightPtr table, std::int64_t hidden, WeightPtr pos_table,
                     const std::int32_t* positions);

}  // namespace inflight::kernels::cpu
