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

// The walk both pool formats share (KvCacheWrite, KvCacheWriteFp8): calls
// write_head(src, dst) for every new row's every kv head, src the offset of its head_dim values
// in k / v, dst the offset of its slot in the pools (PagedKvShape::Offset).
template <typename WriteHead>
void ForEachNewKvHead(std::int64_t kv_token_stride, const PagedBatch& batch,
                      const PagedKvShape& shape, WriteHead&& write_head) {
  for (std::int32_t s = 0; s < batch.num_seqs; ++s) {
    const std::int32_t* table = batch.table(s);
    for (std::int32_t r = batch.query_start[s]; r < batch.query_start[s + 1]; ++r) {
      const std::int64_t pos = batch.num_cached[s] + (r - batch.query_start[s]);
      const std::int64_t block = table[pos / shape.tokens_per_block];
      const std::int64_t slot = pos % shape.tokens_per_block;
      for (std::int64_t h = 0; h < shape.num_kv_heads; ++h) {
        write_head(r * kv_token_stride + h * shape.head_dim, shape.Offset(block, h, slot));
      }
    }
  }
}

}  // namespace inflight::kernels::cpu
