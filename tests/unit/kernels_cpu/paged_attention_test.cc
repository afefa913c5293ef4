// KvCacheWrite + PagedAttention against ReferenceAttention on contiguous K/V. Block tables are
// shuffled (non-monotonic), pools start as NaN so any read of a slot that was never written shows
// up, and the step's rows come strided out of a fused qkv buffer as the model runner passes them.
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
               << " tokens_per_block " << c.tokens_per_block << " seed " << seed);
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
    if (step == 0) continue;

    std::vector<float> out(batch.num_tokens() * nh * hd + 8, 555.0f);
    PagedAttention(out.data(), rows.data(), row, k_pool.data(), v_pool.data(), batch, shape, nh,
                   1.0f / std::sqrt(static_cast<float>(hd)), pool);
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
                         1.0f / std::sqrt(static_cast<float>(hd)));
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
  EXPECT_EQ(written, expect_written);
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
                 nullptr);
  EXPECT_EQ(out, v);
}

}  // namespace
}  // namespace inflight::kernels::cpu
