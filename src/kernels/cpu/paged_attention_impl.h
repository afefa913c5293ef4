// The CPU paged attention body shared by the fp32 and FP8 KV pools (internal to kernels/cpu).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/paged_attention.h"

namespace inflight::kernels::cpu::detail {

// `make_rows()` is called once per worker and returns a reader `rows(pool_is_v, offset)` giving
// head_dim floats of the K (false) or V (true) cache row at `offset`, valid until its next call:
// the pools' element type and dequantization live there, the attention itself here.
template <typename MakeRows>
void PagedAttentionOver(float* out, const float* q, std::int64_t q_token_stride,
                        const PagedBatch& batch, const PagedKvShape& shape, std::int64_t num_heads,
                        float scale, const AttentionWindow& window, ThreadPool* pool,
                        const MakeRows& make_rows) {
  const std::int32_t num_tokens = batch.num_tokens();
  const std::int64_t head_dim = shape.head_dim;
  const std::int64_t group = num_heads / shape.num_kv_heads;
  std::vector<std::int32_t> seq_of_row(static_cast<std::size_t>(num_tokens));
  for (std::int32_t s = 0; s < batch.num_seqs; ++s)
    for (std::int32_t r = batch.query_start[s]; r < batch.query_start[s + 1]; ++r)
      seq_of_row[r] = s;

  const auto work = [&](std::int64_t begin, std::int64_t end) {
    auto rows = make_rows();
    std::vector<float> scores;
    std::vector<double> acc(static_cast<std::size_t>(head_dim));
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t r = item / num_heads, h = item % num_heads, kvh = h / group;
      const std::int32_t s = seq_of_row[r];
      const std::int32_t* table = batch.table(s);
      const std::int64_t pos = batch.num_cached[s] + (r - batch.query_start[s]);
      // The visible keys are two ranges, the sinks [0, sink_end) and the recent [recent, pos]:
      // key number n of the n_visible lies at position key(n).
      const std::int64_t sink_end = window.SinkEnd(pos), recent = window.RecentBegin(pos);
      const std::int64_t n_visible = window.NumVisible(pos);
      const auto key = [&](std::int64_t n) { return n < sink_end ? n : recent + (n - sink_end); };
      const auto row_of = [&](std::int64_t n) {
        const std::int64_t j = key(n);
        return shape.Offset(table[j / shape.tokens_per_block], kvh, j % shape.tokens_per_block);
      };
      const float* qh = q + r * q_token_stride + h * head_dim;
      scores.resize(static_cast<std::size_t>(n_visible));
      float max_score = -std::numeric_limits<float>::infinity();
      for (std::int64_t n = 0; n < n_visible; ++n) {
        const float* kj = rows(false, row_of(n));
        float dot = 0.0f;
        for (std::int64_t d = 0; d < head_dim; ++d) dot += qh[d] * kj[d];
        scores[n] = dot * scale;
        max_score = std::max(max_score, scores[n]);
      }
      float sum = 0.0f;
      for (std::int64_t n = 0; n < n_visible; ++n) {
        scores[n] = std::exp(scores[n] - max_score);
        sum += scores[n];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (std::int64_t n = 0; n < n_visible; ++n) {
        const float* vj = rows(true, row_of(n));
        for (std::int64_t d = 0; d < head_dim; ++d)
          acc[d] += static_cast<double>(scores[n]) * vj[d];
      }
      float* o = out + (r * num_heads + h) * head_dim;
      for (std::int64_t d = 0; d < head_dim; ++d) o[d] = static_cast<float>(acc[d] / sum);
    }
  };
  ParallelFor(pool, static_cast<std::int64_t>(num_tokens) * num_heads, 4, work);
}

}  // namespace inflight::kernels::cpu::detail
