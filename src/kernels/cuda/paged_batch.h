// The device side of the page-table format of kernels/cpu/paged_kv.h: the same arrays, in device
// memory, plus the sizes the host already knows (a kernel must not read them back to size a grid).
//
// Pools: [num_blocks, num_kv_heads, tokens_per_block, head_dim] in the activation dtype. Row r of
// sequence s (r in [query_start[s], query_start[s+1])) is at position num_cached[s] + r -
// query_start[s]; position p lives in block block_tables[s * max_blocks_per_seq + p /
// tokens_per_block], slot p % tokens_per_block.
#pragma once

#include <cstdint>

#include "kernels/cpu/paged_kv.h"

namespace inflight::kernels::cuda {

using PagedKvShape = cpu::PagedKvShape;
using AttentionWindow = cpu::AttentionWindow;

// An FP8 KV cache's scales, one pair per layer (docs/engine_format.md, "An FP8 KV cache"): its
// pools hold bytes, [num_blocks, num_kv_heads, tokens_per_block, head_dim] E4M3 codes of k / k and
// v / v (cpu::KvCacheWriteFp8), read back as code * scale (cpu::PagedAttentionFp8).
struct KvFp8Scales {
  float k = 1.0f;
  float v = 1.0f;
  // Both finite and > 0.
  bool valid() const { return k > 0.0f && v > 0.0f && k < 3.0e38f && v < 3.0e38f; }
};

// Head dims the FP8 KV-cache kernels (write, decode and context attention) take.
inline bool Fp8KvHeadDimSupported(std::int64_t head_dim) {
  return head_dim == 64 || head_dim == 128;
}

struct PagedBatch {
  std::int32_t num_seqs = 0;
  std::int32_t num_tokens = 0;                 // query_start[num_seqs]
  std::int32_t max_query_len = 0;              // max over s of query_start[s+1] - query_start[s]
  std::int32_t max_kv_len = 0;                 // max over s of num_cached[s] + its query length
  const std::int32_t* query_start = nullptr;   // device [num_seqs + 1]
  const std::int32_t* num_cached = nullptr;    // device [num_seqs]
  const std::int32_t* block_tables = nullptr;  // device [num_seqs, max_blocks_per_seq]
  std::int32_t max_blocks_per_seq = 0;
};

}  // namespace inflight::kernels::cuda
