// The page-table format shared by the KV-cache write and paged attention (CPU reference and CUDA).
//
// Pools: per layer one K pool and one V pool, each [num_blocks, num_kv_heads, tokens_per_block,
// head_dim] fp32. A batch holds num_seqs sequences; sequence s contributes rows [query_start[s],
// query_start[s+1]) of the step's new tokens, at positions num_cached[s], num_cached[s] + 1, ...:
//
//   seq s positions:  [0 ...... num_cached[s]) [num_cached[s] ...... num_cached[s] + n_s)
//                       already in the pools     new this step (rows query_start[s] + j)
//
// Position p of sequence s lives in block block_tables[s * max_blocks_per_seq + p /
// tokens_per_block], slot p % tokens_per_block. Block ids need not be monotonic; unused table
// entries are never read.
#pragma once

#include <cstdint>

namespace inflight::kernels::cpu {

struct PagedKvShape {
  std::int64_t num_kv_heads = 0;
  std::int64_t tokens_per_block = 0;
  std::int64_t head_dim = 0;

  // Offset in floats of (block, kv head, slot, 0) in a pool.
  std::int64_t Offset(std::int64_t block, std::int64_t kv_head, std::int64_t slot) const {
    return ((block * num_kv_heads + kv_head) * tokens_per_block + slot) * head_dim;
  }
  std::int64_t BlockFloats() const { return num_kv_heads * tokens_per_block * head_dim; }
};

struct PagedBatch {
  std::int32_t num_seqs = 0;
  const std::int32_t* query_start = nullptr;   // [num_seqs + 1], query_start[0] = 0
  const std::int32_t* num_cached = nullptr;    // [num_seqs]
  const std::int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  std::int32_t max_blocks_per_seq = 0;

  std::int32_t num_tokens() const { return query_start[num_seqs]; }
  const std::int32_t* table(std::int32_t s) const {
    return block_tables + static_cast<std::int64_t>(s) * max_blocks_per_seq;
  }
};

}  // namespace inflight::kernels::cpu
