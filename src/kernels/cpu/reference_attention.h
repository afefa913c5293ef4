// Unpaged causal attention on contiguous K/V, in double: the check for PagedAttention.
#pragma once

#include <cstdint>

#include "kernels/cpu/paged_kv.h"

namespace inflight::kernels::cpu {

// q, out: [num_q, num_heads, head_dim]; k, v: [num_kv, num_kv_heads, head_dim]; all contiguous.
// Query i is at position p = num_kv - num_q + i and attends the keys j that window.Visible(p, j)
// admits (every j <= p without a window), tested key by key. Query head h reads kv head h /
// (num_heads / num_kv_heads). Precondition: num_q <= num_kv.
void ReferenceAttention(float* out, const float* q, const float* k, const float* v,
                        std::int64_t num_q, std::int64_t num_kv, std::int64_t num_heads,
                        std::int64_t num_kv_heads, std::int64_t head_dim, float scale,
                        const AttentionWindow& window = {});

}  // namespace inflight::kernels::cpu
