// KvCacheWrite + PagedAttention against ReferenceAttention on contiguous K/V, with and without
// sliding windows and sinks. Block tables are shuffled (non-monotonic), pools start as NaN so any
// read of a slot that was never written shows up (and with a window the positions no query sees go
// back to NaN), and the step's rows come strided out of a fused qkv buffer as the model runner
// passes them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/kv_cache_write.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/reference_attention.h"
#include "unit/kernels_cpu/check_close.h"

namespace inflight::kernels::cpu {
namespace {

using testing::CheckClose;
using testing::RandomFloats;

struct SeqSpec {
  std::int32_t num_cached, num_new;
};

struct AttnCase {
  std::int64_t head_dim, num_heads, num_kv_heads, tokens_per_block;
  std::vector<SeqSpec> seqs;
  AttentionWindow window = {};
};

// Builds a PagedBatch over `specs` (per-seq counts) that owns its arrays.
struct BatchArrays {
  std::vector<std::int32_t> query_start, num_cached, tables;
  std::int32_t max_blocks = 0;
  PagedBatch View() const {
    PagedBatch b;
    b.num_seqs = static_cast<std::int32_t>(num_cached.size());
    b.query_start = query_start.data();
    b.num_cached = num_cached.data();
    b.block_tables = tables.data();
    b.max_blocks_per_seq = max_blocks;
    return b;
  }
};

void RunCase(const AttnCase& c, std::uint64_t seed, ThreadPool* pool) {
  SCOPED_TRACE(::testing::Message()
               << "head_dim " << c.head_dim << " heads " << c.num_heads << "/" << c.num_kv_heads
               << " tokens_per_block " << c.tokens_per_block << " window " << c.window.window
               << " sink " << c.window.sink << " seed " << seed);
  std::mt19937_64 rng(seed);
  const std::int64_t hd = c.head_dim, nh = c.num_heads, nkv = c.num_kv_heads,
                     tpb = c.tokens_per_block;
  const std::int64_t row = (nh + 2 * nkv) * hd;  // fused qkv row
  const PagedKvShape shape{nkv, tpb, hd};
  const auto num_seqs = static_cast<std::int32_t>(c.seqs.size());

  // Shuffled block ids shared out among the sequences, with spare blocks nobody owns.
  std::int32_t max_blocks = 0, total_blocks = 0;
  for (const auto& s : c.seqs) {
    const auto nb = static_cast<std::int32_t>((s.num_cached + s.num_new + tpb - 1) / tpb);
    max_blocks = std::max(max_blocks, nb + 2);  // padded table: the tail entries are garbage
    total_blocks += nb;
  }
  const std::int32_t num_blocks = total_blocks + 3;
  std::vector<std::int32_t> ids(num_blocks);
  for (std::int32_t i = 0; i < num_blocks; ++i) ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<std::int32_t> tables(static_cast<std::size_t>(num_seqs) * max_blocks, -12345);
  {
    std::size_t next = 0;
    for (std::int32_t s = 0; s < num_seqs; ++s) {
      const auto nb = (c.seqs[s].num_cached + c.seqs[s].num_new + tpb - 1) / tpb;
      for (std::int64_t b = 0; b < nb; ++b) tables[s * max_blocks + b] = ids[next++];
    }
  }

  // Every position's q/k/v of every sequence, in fused rows.
  std::vector<std::vector<float>> qkv(num_seqs);
  for (std::int32_t s = 0; s < num_seqs; ++s)
    qkv[s] = RandomFloats(rng, (c.seqs[s].num_cached + c.seqs[s].num_new) * row, -2.0f, 2.0f);

  const float nan = std::nanf("");
  std::int64_t poisoned = 0;  // written K floats set back to NaN
  std::vector<float> k_pool(num_blocks * shape.BlockFloats(), nan);
  std::vector<float> v_pool(k_pool.size(), nan);

  // Two steps: first the cached prefixes (as an earlier step would have), then the new rows.
  for (int step = 0; step < 2; ++step) {
    BatchArrays a;
    a.tables = tables;
    a.max_blocks = max_blocks;
    a.query_start.push_back(0);
    std::vector<float> rows;
    for (std::int32_t s = 0; s < num_seqs; ++s) {
      const auto& sp = c.seqs[s];
      const std::int32_t first = step == 0 ? 0 : sp.num_cached;
      const std::int32_t count = step == 0 ? sp.num_cached : sp.num_new;
      a.num_cached.push_back(first);
      a.query_start.push_back(a.query_start.back() + count);
      rows.insert(rows.end(), qkv[s].begin() + first * row, qkv[s].begin() + (first + count) * row);
    }
    const PagedBatch batch = a.View();
    if (batch.num_tokens() == 0) continue;
    KvCacheWrite(k_pool.data(), v_pool.data(), rows.data() + nh * hd, rows.data() + (nh + nkv) * hd,
                 row, batch, shape);
    if (step == 0) {
      // Cached positions none of the new rows sees (past the sinks, before the first new row's
      // window) back to NaN: reading one would show.
      for (std::int32_t s = 0; s < num_seqs; ++s) {
        for (std::int64_t p = c.window.sink; p < c.window.RecentBegin(c.seqs[s].num_cached); ++p) {
          for (std::int64_t h = 0; h < nkv; ++h) {
            const std::int64_t at = shape.Offset(tables[s * max_blocks + p / tpb], h, p % tpb);
            std::fill(k_pool.begin() + at, k_pool.begin() + at + hd, nan);
            std::fill(v_pool.begin() + at, v_pool.begin() + at + hd, nan);
            poisoned += hd;
          }
        }
      }
      continue;
    }

    std::vector<float> out(batch.num_tokens() * nh * hd + 8, 555.0f);
    PagedAttention(out.data(), rows.data(), row, k_pool.data(), v_pool.data(), batch, shape, nh,
                   1.0f / std::sqrt(static_cast<float>(hd)), c.window, pool);
    for (int g = 0; g < 8; ++g) ASSERT_EQ(out[batch.num_tokens() * nh * hd + g], 555.0f) << "guard";

    for (std::int32_t s = 0; s < num_seqs; ++s) {
      const auto& sp = c.seqs[s];
      const std::int64_t total = sp.num_cached + sp.num_new;
      if (sp.num_new == 0) continue;
      std::vector<float> q(sp.num_new * nh * hd), k(total * nkv * hd), v(total * nkv * hd);
      for (std::int64_t t = 0; t < total; ++t) {
        const float* r = qkv[s].data() + t * row;
        std::copy(r + nh * hd, r + (nh + nkv) * hd, k.begin() + t * nkv * hd);
        std::copy(r + (nh + nkv) * hd, r + row, v.begin() + t * nkv * hd);
        if (t >= sp.num_cached)
          std::copy(r, r + nh * hd, q.begin() + (t - sp.num_cached) * nh * hd);
      }
      std::vector<float> ref(q.size());
      ReferenceAttention(ref.data(), q.data(), k.data(), v.data(), sp.num_new, total, nh, nkv, hd,
                         1.0f / std::sqrt(static_cast<float>(hd)), c.window);
      const std::vector<double> expected(ref.begin(), ref.end());
      const float* found = out.data() + a.query_start[s] * nh * hd;
      EXPECT_TRUE(CheckClose(found, expected.data(), expected.size(), 1e-5, seed))
          << "sequence " << s;
    }
  }

  // Exactly the written slots stopped being NaN: the write touched nothing else.
  std::int64_t written = 0, expect_written = 0;
  for (float f : k_pool) written += !std::isnan(f);
  for (const auto& s : c.seqs) expect_written += (s.num_cached + s.num_new) * nkv * hd;
  EXPECT_EQ(written, expect_written - poisoned);
}

TEST(PagedAttentionTest, MatchesUnpagedReference) {
  const std::vector<std::vector<SeqSpec>> batches = {
      {{0, 1}},                                     // first token of a prompt
      {{0, 19}, {37, 1}, {90, 9}},                  // prompt, decode, chunk after a cached prefix
      {{0, 99}},                                    // one long prompt
      {{5, 3}, {0, 1}, {63, 1}, {64, 1}, {17, 0}},  // block-boundary decodes, an idle sequence
  };
  ThreadPool pool(3);
  std::uint64_t seed = 600;
  for (std::int64_t head_dim : {64, 80, 96, 128}) {
    for (auto [nh, nkv] : {std::pair<std::int64_t, std::int64_t>{4, 4}, {8, 2}, {6, 1}}) {
      for (std::int64_t tpb : {1, 5, 16}) {
        for (const auto& seqs : batches) {
          RunCase({head_dim, nh, nkv, tpb, seqs}, seed, (seed % 2) ? &pool : nullptr);
          ++seed;
        }
      }
    }
  }
}

// Windows against the unpaged reference: W = 1 (each row sees itself), windows inside a block,
// crossing block boundaries, longer than every sequence, sinks shorter and longer than a block,
// sinks beyond the window, and chunks whose first rows need keys from before the chunk (a cached
// prefix longer than the window), mixed with decodes.
TEST(PagedAttentionTest, WindowsMatchUnpagedReference) {
  const std::vector<std::vector<SeqSpec>> batches = {
      {{0, 40}},                           // one prompt
      {{0, 19}, {37, 1}, {90, 9}},         // prompt, decode, chunk after a long cached prefix
      {{5, 3}, {0, 1}, {63, 1}, {64, 1}},  // decodes at block boundaries
      {{120, 30}, {200, 1}},               // chunk and decode far past any window below
  };
  const std::vector<AttentionWindow> windows = {{1, 0},  {3, 0},  {5, 2},   {16, 0},
                                                {17, 1}, {33, 7}, {500, 0}, {4, 40}};
  ThreadPool pool(3);
  std::uint64_t seed = 900;
  for (const AttentionWindow& w : windows) {
    for (std::int64_t tpb : {1, 5, 16}) {
      for (const auto& seqs : batches) {
        RunCase({64, 4, 2, tpb, seqs, w}, seed, (seed % 2) ? &pool : nullptr);
        ++seed;
      }
    }
  }
}

// The window's ranges (what the kernels walk) are exactly the keys its mask admits (what the
// reference tests), and SumVisible is the rows' counts summed, for every position, window and sink
// up to 40.
TEST(PagedAttentionTest, WindowRangesAreTheMask) {
  for (std::int32_t window = 0; window <= 12; ++window) {
    for (std::int32_t sink = 0; sink <= (window > 0 ? 14 : 0); ++sink) {
      const AttentionWindow w{window, sink};
      for (std::int64_t i = 0; i < 40; ++i) {
        std::int64_t count = 0;
        for (std::int64_t j = 0; j <= i + 2; ++j) {
          const bool in_ranges = j < w.SinkEnd(i) || (j >= w.RecentBegin(i) && j <= i);
          ASSERT_EQ(w.Visible(i, j), in_ranges)
              << "window " << window << " sink " << sink << " i " << i << " j " << j;
          count += w.Visible(i, j);
        }
        ASSERT_EQ(w.NumVisible(i), count) << "window " << window << " sink " << sink << " i " << i;
        // The closed form over rows [i, i + n) against the rows one by one.
        for (std::int64_t n : {1, 2, 7, 30}) {
          std::int64_t rows = 0;
          for (std::int64_t p = i; p < i + n; ++p) rows += w.NumVisible(p);
          ASSERT_EQ(w.SumVisible(i, n), rows)
              << "window " << window << " sink " << sink << " rows " << i << "+" << n;
        }
        // transformers' sliding_window_overlay: kv_idx > q_idx - sliding_window, with causality.
        if (window > 0 && sink == 0) {
          for (std::int64_t j = 0; j <= i; ++j) ASSERT_EQ(w.Visible(i, j), j > i - window);
        }
      }
    }
  }
}

// W = 1 returns each row's own value, whatever the scores.
TEST(PagedAttentionTest, WindowOfOneReturnsTheRowsOwnValue) {
  const PagedKvShape shape{1, 4, 64};
  std::mt19937_64 rng(8);
  const std::int32_t n = 9;
  auto q = RandomFloats(rng, n * 64, -50.0f, 50.0f), k = RandomFloats(rng, n * 64),
       v = RandomFloats(rng, n * 64);
  std::vector<float> k_pool(4 * shape.BlockFloats(), std::nanf("")),
      v_pool(k_pool.size(), std::nanf(""));
  std::int32_t qs[2] = {0, n}, cached[1] = {0}, table[3] = {3, 0, 2};
  PagedBatch b{1, qs, cached, table, 3};
  KvCacheWrite(k_pool.data(), v_pool.data(), k.data(), v.data(), 64, b, shape);
  std::vector<float> out(n * 64);
  PagedAttention(out.data(), q.data(), 64, k_pool.data(), v_pool.data(), b, shape, 1, 0.125f,
                 AttentionWindow{1, 0}, nullptr);
  EXPECT_EQ(out, v);
}

// One query over one key returns that key's value exactly, whatever the scores.
TEST(PagedAttentionTest, SinglePositionReturnsItsValue) {
  const PagedKvShape shape{1, 4, 64};
  std::vector<float> k_pool(3 * shape.BlockFloats(), std::nanf("")),
      v_pool(k_pool.size(), std::nanf(""));
  std::mt19937_64 rng(7);
  auto q = RandomFloats(rng, 64, -50.0f, 50.0f), k = RandomFloats(rng, 64),
       v = RandomFloats(rng, 64);
  std::int32_t qs[2] = {0, 1}, cached[1] = {0}, table[1] = {2};
  PagedBatch b{1, qs, cached, table, 1};
  KvCacheWrite(k_pool.data(), v_pool.data(), k.data(), v.data(), 64, b, shape);
  std::vector<float> out(64);
  PagedAttention(out.data(), q.data(), 64, k_pool.data(), v_pool.data(), b, shape, 1, 0.125f,
                 AttentionWindow{}, nullptr);
  EXPECT_EQ(out, v);
}

}  // namespace
}  // namespace inflight::kernels::cpu
