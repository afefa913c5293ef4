// Token embedding gather plus optional learned positions (GPT-2); CUDA twin of
// kernels/cpu/embedding.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

// out[t] = table[token_ids[t]] (+ pos_table[positions[t]] when pos_table != nullptr), rows of
// `hidden`, in fp32 then rounded to dtype. table: [vocab, hidden]; pos_table: [max_positions,
// hidden]; token_ids, positions: device [num_tokens]. The caller validates ids and positions.
cudaError_t EmbeddingGather(void* out, const std::int32_t* token_ids, std::int64_t num_tokens,
                            const void* table, std::int64_t hidden, const void* pos_table,
                            const std::int32_t* positions, DType dtype, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
