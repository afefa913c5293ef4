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

#include <algorithm>
#include <cstdint>

namespace inflight::kernels::cpu {

// Which of its causal keys [0, i] the query at position i attends. window 0: all of them. window W
// > 0: the W most recent, i - W < j <= i (transformers' masking_utils.py, sliding_window_overlay:
// kv_idx > q_idx - sliding_window), and besides them the first `sink` positions j < min(sink, i +
// 1), StreamingLLM's attention sinks (sink is 0 without a window). Keys outside are never read.
//
//   i = 9, W = 4, sink = 2:   keys 0 1 [2 3 4 5] 6 7 8 9
//                                  s s  .......  r r r r     s: sink, r: recent, .: skipped
struct AttentionWindow {
  std::int32_t window = 0;
  std::int32_t sink = 0;

  bool windowed() const { return window > 0; }
  // First key of the recent range of the query at position i.
  std::int64_t RecentBegin(std::int64_t i) const {
    return window > 0 ? std::max<std::int64_t>(0, i - window + 1) : 0;
  }
  // Sink keys [0, SinkEnd(i)) lie below the recent range (empty when the window reaches 0).
  std::int64_t SinkEnd(std::int64_t i) const {
    return std::min<std::int64_t>(sink, RecentBegin(i));
  }
  // Keys the query at position i attends: SinkEnd(i) + (i + 1 - RecentBegin(i)).
  std::int64_t NumVisible(std::int64_t i) const { return SinkEnd(i) + i + 1 - RecentBegin(i); }
  // NumVisible summed over the rows at positions [first, first + n), in closed form (work
  // estimates of whole prompt chunks).
  std::int64_t SumVisible(std::int64_t first, std::int64_t n) const {
    // Row p sees min(p + 1, W) recent keys and min(sink, max(0, p + 1 - W)) sinks.
    const std::int64_t a = first + 1, b = first + n;
    if (window <= 0) return (a + b) * n / 2;
    return SumClamped(a, b, window) + SumClamped(a - window, b - window, sink);
  }
  // The mask itself, key by key (the reference's form; the kernels walk the two ranges).
  bool Visible(std::int64_t i, std::int64_t j) const {
    return j <= i && (window <= 0 || j > i - window || j < sink);
  }

 private:
  // Sum of min(cap, max(0, y)) over y in [lo, hi].
  static std::int64_t SumClamped(std::int64_t lo, std::int64_t hi, std::int64_t cap) {
    if (hi < lo || cap <= 0) return 0;
    std::int64_t sum = 0;
    const std::int64_t rise_lo = std::max<std::int64_t>(lo, 1), rise_hi = std::min(hi, cap);
    if (rise_lo <= rise_hi) sum += (rise_lo + rise_hi) * (rise_hi - rise_lo + 1) / 2;
    const std::int64_t flat_lo = std::max(lo, cap + 1);
    if (flat_lo <= hi) sum += cap * (hi - flat_lo + 1);
    return sum;
  }
};

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
