// Scatters a step's new K/V rows into the paged pools (format: kernels/cpu/paged_kv.h).
#pragma once

#include <cstdint>

#include "kernels/cpu/paged_kv.h"

namespace inflight::kernels::cpu {

// k, v: the new rows, row r at k + r * kv_token_stride holding num_kv_heads heads of head_dim
// floats (strided so they can point into a fused qkv output). Row r of sequence s is at position
// num_cached[s] + (r - query_start[s]) and goes to that position's block and slot in k_pool /
// v_pool. The caller guarantees the block tables cover every position and hold valid block ids.
void KvCacheWrite(float* k_pool, float* v_pool, const float* k, const float* v,
                  std::int64_t kv_token_stride, const PagedBatch& batch, const PagedKvShape& shape);

}  // namespace inflight::kernels::cpu
