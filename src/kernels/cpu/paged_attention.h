// Causal attention of a step's new query rows over the paged KV cache (format:
// kernels/cpu/paged_kv.h).
#pragma once

#include <cstdint>

#include "kernels/cpu/paged_kv.h"
#include "kernels/cpu/thread_pool.h"

namespace inflight::kernels::cpu {

// q: row r at q + r * q_token_stride, num_heads heads of head_dim floats (already rotated).
// out: [num_tokens, num_heads, head_dim] contiguous. Row r of sequence s sits at position
// p = num_cached[s] + (r - query_start[s]) and attends that sequence's positions [0, p] (the cached
// prefix and the step's own earlier rows, which KvCacheWrite must have stored first) that `window`
// shows it (paged_kv.h); positions it hides are never read.
// GQA/MQA: query head h reads kv head h / (num_heads / shape.num_kv_heads).
// softmax(scale * q·k) in fp32 with the row maximum subtracted; scale is usually 1/sqrt(head_dim).
// Work is split over (row, head) pairs through `pool` (nullptr: calling thread only).
void PagedAttention(float* out, const float* q, std::int64_t q_token_stride, const float* k_pool,
                    const float* v_pool, const PagedBatch& batch, const PagedKvShape& shape,
                    std::int64_t num_heads, float scale, const AttentionWindow& window,
                    ThreadPool* pool);

}  // namespace inflight::kernels::cpu
