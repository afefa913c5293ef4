// Causal attention of a step's new query rows (prompt chunks, or any mix of lengths) over the paged
// KV cache, flash-attention style. CUDA twin of kernels/cpu/paged_attention.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cuda/paged_batch.h"

namespace inflight::kernels::cuda {

// q: row r at q + r * q_token_stride, num_heads heads of head_dim (already rotated).
// out: [num_tokens, num_heads, head_dim] contiguous. Row r of sequence s at position p =
// num_cached[s] + r - query_start[s] attends positions [0, p] of its sequence, all of which must be
// in the pools (RopeKvWrite first). Query head h reads kv head h / (num_heads / num_kv_heads).
// softmax(scale * q·k) and the weighted sum of V in fp32. head_dim: 64, 80, 96 or 128; dtype fp16
// or bf16. Pool slots past each sequence's last position are never read (they may hold NaN).
cudaError_t PagedAttentionContext(void* out, const void* q, std::int64_t q_token_stride,
                                  const void* k_pool, const void* v_pool, const PagedBatch& batch,
                                  const PagedKvShape& shape, std::int64_t num_heads, float scale,
                                  DType dtype, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
