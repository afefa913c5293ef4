#include "kv_cache/block_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

namespace inflight::kv_cache {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

VecTokens Iota(TokenIdType first, int n) {
  VecTokens v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

VecTokens Concat(VecTokens a, const VecTokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

#define EXPECT_CONSISTENT(bm) EXPECT_EQ((bm).CheckInvariants(), "")

TEST(BlockManagerTest, FreshBlocksComeFromTheFreeListInOrder) {
  BlockManager bm(8, 4, /*enable_reuse=*/true);
  EXPECT_EQ(bm.AllocatePrompt(1, Iota(0, 10)), 0);
  EXPECT_THAT(bm.BlockTable(1), ElementsAre(0, 1, 2));
  EXPECT_EQ(bm.AllocatePrompt(2, Iota(100, 5)), 0);
  EXPECT_THAT(bm.BlockTable(2), ElementsAre(3, 4));
  EXPECT_EQ(bm.NumFreeBlocks(), 3);
  EXPECT_CONSISTENT(bm);

  // Nothing was committed, so nothing is cached: freed blocks return to the back of the free list.
  bm.Free(1);
  EXPECT_EQ(bm.NumCachedBlocks(), 0);
  EXPECT_EQ(bm.NumFreeBlocks(), 6);
  EXPECT_EQ(bm.AllocatePrompt(3, Iota(200, 20)), 0);
  EXPECT_THAT(bm.BlockTable(3), ElementsAre(5, 6, 7, 2, 1));
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManagerTest, SharesCommittedFullBlocksWithALaterSequence) {
  BlockManager bm(8, 4, true);
  const VecTokens prompt = Iota(0, 10);
  ASSERT_EQ(bm.AllocatePrompt(1, prompt), 0);
  bm.CommitTokens(1, prompt, 10);
  EXPECT_TRUE(bm.IsCached(0));
  EXPECT_TRUE(bm.IsCached(1));
  EXPECT_FALSE(bm.IsCached(2));  // partial

  const PrefixMatch match = bm.MatchPrefix(prompt);
  EXPECT_EQ(match.num_blocks, 2);
  EXPECT_EQ(match.num_blocks_in_use, 2);
  EXPECT_EQ(bm.AllocatePrompt(2, prompt), 8);
  EXPECT_THAT(bm.BlockTable(2), ElementsAre(0, 1, 3));
  EXPECT_EQ(bm.RefCount(0), 2);
  EXPECT_EQ(bm.RefCount(1), 2);
  EXPECT_EQ(bm.RefCount(2), 1);
  EXPECT_EQ(bm.RefCount(3), 1);
  EXPECT_CONSISTENT(bm);

  const SequenceBlockStats s2 = bm.SequenceStats(2);
  EXPECT_EQ(s2.reused_blocks, 2);
  EXPECT_EQ(s2.alloc_new_blocks, 1);
  EXPECT_EQ(s2.alloc_total_blocks, 3);
  const KvCacheStats g = bm.Stats();
  EXPECT_EQ(g.alloc_new_blocks, 4);
  EXPECT_EQ(g.reused_blocks, 2);
  EXPECT_EQ(g.alloc_total_blocks, 6);
  EXPECT_DOUBLE_EQ(g.cache_hit_rate, 2.0 / 6.0);
  EXPECT_EQ(g.used_num_blocks, 4);
  EXPECT_EQ(g.free_num_blocks, 4);

  // A shared block stays in use until its last user frees it.
  bm.Free(1);
  EXPECT_EQ(bm.RefCount(0), 1);
  EXPECT_EQ(bm.NumCachedBlocks(), 0);
  bm.Free(2);
  EXPECT_EQ(bm.NumCachedBlocks(), 2);
  EXPECT_EQ(bm.NumFreeBlocks(), 8);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManagerTest, NeverReusesTheWholePrompt) {
  BlockManager bm(8, 4, true);
  const VecTokens prompt = Iota(0, 8);
  ASSERT_EQ(bm.AllocatePrompt(1, prompt), 0);
  bm.CommitTokens(1, prompt, 8);
  EXPECT_TRUE(bm.IsCached(1));
  // Exactly two full cached blocks: only the first is reused, so the last token is computed.
  EXPECT_EQ(bm.AllocatePrompt(2, prompt), 4);
  EXPECT_THAT(bm.BlockTable(2), ElementsAre(0, 2));
  // One more token: both blocks are reused.
  EXPECT_EQ(bm.AllocatePrompt(3, Concat(prompt, {99})), 8);
  EXPECT_THAT(bm.BlockTable(3), ElementsAre(0, 1, 3));
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManagerTest, PartialAndUncomputedBlocksAreNotShared) {
  BlockManager bm(8, 4, true);
  const VecTokens prompt = Iota(0, 6);
  ASSERT_EQ(bm.AllocatePrompt(1, prompt), 0);
  bm.CommitTokens(1, prompt, 3);  // block 0 full but not all computed
  EXPECT_FALSE(bm.IsCached(0));
  bm.CommitTokens(1, prompt, 6);
  EXPECT_TRUE(bm.IsCached(0));
  EXPECT_FALSE(bm.IsCached(1));

  // Same first 6 tokens, then more: block 1 of seq 1 is partial, so only block 0 is shared.
  EXPECT_EQ(bm.AllocatePrompt(2, Concat(prompt, {6, 7, 8})), 4);
  EXPECT_THAT(bm.BlockTable(2), ElementsAre(0, 2, 3));
  EXPECT_EQ(bm.RefCount(1), 1);

  // Seq 1 decodes on: when its block 1 fills and is computed it becomes shareable.
  VecTokens all = Concat(prompt, {6, 7});
  ASSERT_TRUE(bm.EnsureCapacity(1, 8));
  bm.CommitTokens(1, all, 8);
  EXPECT_TRUE(bm.IsCached(1));
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManagerTest, FreedChainIsEvictedTailFirstAndOnlyWhenNoFreeBlockIsLeft) {
  BlockManager bm(4, 2, true);
  const VecTokens a = {1, 2, 3, 4, 5};
  ASSERT_EQ(bm.AllocatePrompt(1, a), 0);
  EXPECT_THAT(bm.BlockTable(1), ElementsAre(0, 1, 2));
  bm.CommitTokens(1, a, 5);
  bm.Free(1);
  EXPECT_THAT(bm.EvictionOrder(), ElementsAre(1, 0));  // deepest block first
  EXPECT_EQ(bm.NumFreeBlocks(), 4);

  // Three fresh blocks: the two uncached free ones first (3, then 2), then the LRU head.
  ASSERT_EQ(bm.AllocatePrompt(2, VecTokens{7, 8, 9, 10, 11, 12}), 0);
  EXPECT_THAT(bm.BlockTable(2), ElementsAre(3, 2, 1));
  EXPECT_FALSE(bm.IsCached(1));
  EXPECT_TRUE(bm.IsCached(0));
  EXPECT_THAT(bm.EvictionOrder(), ElementsAre(0));
  EXPECT_CONSISTENT(bm);

  // Seq 3 would reuse block 0 but needs two more blocks: only one can be had. Nothing changes.
  EXPECT_EQ(bm.MatchPrefix(a).num_blocks, 1);
  EXPECT_EQ(bm.AllocatePrompt(3, a), std::nullopt);
  EXPECT_FALSE(bm.HasSequence(3));
  EXPECT_THAT(bm.EvictionOrder(), ElementsAre(0));
  EXPECT_EQ(bm.NumFreeBlocks(), 1);
  EXPECT_EQ(bm.Stats().alloc_total_blocks, 6);
  EXPECT_CONSISTENT(bm);

  bm.Free(2);  // block 1 lost its key when evicted: it joins the free list, not the LRU
  EXPECT_THAT(bm.EvictionOrder(), ElementsAre(0));
  EXPECT_EQ(bm.AllocatePrompt(3, a), 2);
  EXPECT_THAT(bm.BlockTable(3), ElementsAre(0, 1, 2));
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManagerTest, ReuseRefreshesLruPosition) {
  BlockManager bm(3, 2, true);
  const VecTokens x = {1, 1, 1};
  const VecTokens y = {2, 2, 2};
  ASSERT_EQ(bm.AllocatePrompt(1, x), 0);  // blocks 0, 1
  bm.CommitTokens(1, x, 3);
  bm.Free(1);                             // free: [2, 1], LRU: [0]
  ASSERT_EQ(bm.AllocatePrompt(2, y), 0);  // blocks 2, 1
  bm.CommitTokens(2, y, 3);
  bm.Free(2);  // free: [1], LRU: [0, 2]
  EXPECT_THAT(bm.EvictionOrder(), ElementsAre(0, 2));

  ASSERT_EQ(bm.AllocatePrompt(3, x), 2);  // reuses 0, takes 1
  EXPECT_THAT(bm.BlockTable(3), ElementsAre(0, 1));
  bm.Free(3);
  EXPECT_THAT(bm.EvictionOrder(), ElementsAre(2, 0));  // x's block is now the most recently used

  // Three fresh blocks: free block 1, then evict 2 (y), then 0 (x).
  ASSERT_EQ(bm.AllocatePrompt(4, Iota(50, 5)), 0);
  EXPECT_THAT(bm.BlockTable(4), ElementsAre(1, 2, 0));
  EXPECT_EQ(bm.NumCachedBlocks(), 0);
  EXPECT_EQ(bm.MatchPrefix(x).num_blocks, 0);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManagerTest, OutOfBlocksReturnsAValueAndChangesNothing) {
  BlockManager bm(4, 4, true);
  ASSERT_EQ(bm.AllocatePrompt(1, Iota(0, 12)), 0);
  const KvCacheStats before = bm.Stats();
  EXPECT_FALSE(bm.CanAllocate(2));
  EXPECT_TRUE(bm.CanAllocate(1));
  EXPECT_EQ(bm.AllocatePrompt(2, Iota(0, 8)), std::nullopt);
  EXPECT_FALSE(bm.HasSequence(2));
  EXPECT_THAT(bm.BlockTable(2), IsEmpty());
  EXPECT_FALSE(bm.EnsureCapacity(1, 17));
  EXPECT_THAT(bm.BlockTable(1), ElementsAre(0, 1, 2));
  EXPECT_FALSE(bm.EnsureCapacity(7, 5));
  EXPECT_FALSE(bm.HasSequence(7));
  EXPECT_EQ(bm.Stats().alloc_total_blocks, before.alloc_total_blocks);
  EXPECT_EQ(bm.NumFreeBlocks(), 1);
  EXPECT_CONSISTENT(bm);

  EXPECT_TRUE(bm.EnsureCapacity(1, 12));  // already held: no-op
  EXPECT_TRUE(bm.EnsureCapacity(1, 16));
  EXPECT_THAT(bm.BlockTable(1), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(bm.NumFreeBlocks(), 0);
  bm.Free(1);
  EXPECT_EQ(bm.NumFreeBlocks(), 4);
  EXPECT_EQ(bm.Stats().used_num_blocks, 0);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManagerTest, HashCollisionsNeverMatchDifferentContentOrParent) {
  BlockManager bm(16, 4, true);
  bm.SetHashFunctionForTesting([](std::uint64_t, std::span<const TokenIdType>) -> std::uint64_t {
    return 42;  // every chain link collides
  });
  const VecTokens c = {9, 9, 9, 9, 1};
  const VecTokens a = {1, 2, 3, 4, 5, 6, 7, 8, 0};
  ASSERT_EQ(bm.AllocatePrompt(1, c), 0);
  bm.CommitTokens(1, c, 5);
  ASSERT_EQ(bm.AllocatePrompt(2, a), 0);
  bm.CommitTokens(2, a, 9);
  EXPECT_CONSISTENT(bm);

  // Block 1 of b has a's block-1 tokens and a cached (but different) parent: only block 0 matches.
  const VecTokens b = {9, 9, 9, 9, 5, 6, 7, 8, 0};
  EXPECT_EQ(bm.MatchPrefix(b).num_blocks, 1);
  EXPECT_EQ(bm.AllocatePrompt(3, b), 4);
  EXPECT_EQ(bm.BlockTable(3)[0], bm.BlockTable(1)[0]);
  EXPECT_NE(bm.BlockTable(3)[1], bm.BlockTable(2)[1]);
  // Same hash, different tokens: no match.
  EXPECT_EQ(bm.MatchPrefix(VecTokens{1, 2, 3, 5, 5, 6, 7, 8, 0}).num_blocks, 0);
  // The real prefix still matches in full.
  EXPECT_EQ(bm.AllocatePrompt(4, a), 8);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManagerTest, SameBlockComputedTwiceKeepsTheFirstKeyAndChainsTheSecond) {
  BlockManager bm(16, 4, true);
  const VecTokens p = Iota(0, 13);
  ASSERT_EQ(bm.AllocatePrompt(1, p), 0);  // 0 1 2 3
  ASSERT_EQ(bm.AllocatePrompt(2, p), 0);  // 4 5 6 7: nothing was committed yet
  bm.CommitTokens(1, p, 4);               // block 0 keyed
  bm.CommitTokens(2, p, 13);              // block 4 duplicates block 0; blocks 5, 6 keyed under it
  EXPECT_TRUE(bm.IsCached(0));
  EXPECT_FALSE(bm.IsCached(4));
  EXPECT_TRUE(bm.IsCached(5));
  EXPECT_TRUE(bm.IsCached(6));
  EXPECT_CONSISTENT(bm);

  EXPECT_EQ(bm.AllocatePrompt(3, p), 12);
  EXPECT_THAT(bm.BlockTable(3), ElementsAre(0, 5, 6, 8));
  bm.Free(2);  // its duplicate block 4 is not cached: straight to the free list
  EXPECT_EQ(bm.NumCachedBlocks(), 0);
  EXPECT_EQ(bm.RefCount(4), 0);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManagerTest, ReuseCanBeTurnedOff) {
  BlockManager off(8, 4, false);
  const VecTokens p = Iota(0, 9);
  ASSERT_EQ(off.AllocatePrompt(1, p), 0);
  off.CommitTokens(1, p, 9);
  EXPECT_FALSE(off.IsCached(0));
  EXPECT_EQ(off.AllocatePrompt(2, p), 0);
  off.Free(1);
  EXPECT_EQ(off.NumCachedBlocks(), 0);
  EXPECT_CONSISTENT(off);

  BlockManager on(8, 4, true);
  ASSERT_EQ(on.AllocatePrompt(1, p), 0);
  on.CommitTokens(1, p, 9);
  EXPECT_EQ(on.AllocatePrompt(2, p, /*reuse_prefix=*/false), 0);
  EXPECT_THAT(on.BlockTable(2), ElementsAre(3, 4, 5));
  EXPECT_EQ(on.AllocatePrompt(3, p), 8);
}

// Random allocations, growth, commits and frees over a small pool, with colliding hashes. Besides
// the structural invariants, checks the property reuse exists for: a reused block holds K/V that
// were computed for exactly the same token prefix. A shadow map records, per block, the prefix its
// K/V stand for.
void RunStress(std::uint32_t seed, BlockManager::HashFn hash) {
  constexpr int kTpb = 4;
  BlockManager bm(24, kTpb, true);
  if (hash != nullptr) bm.SetHashFunctionForTesting(hash);
  std::mt19937 rng(seed);
  std::map<SeqId, VecTokens> live;            // tokens known
  std::map<SeqId, int> computed;              // tokens computed
  std::map<std::int32_t, VecTokens> written;  // block -> prefix its K/V were computed from
  const std::vector<VecTokens> prefixes = {
      Iota(0, 9), Iota(0, 5), Concat(Iota(0, 4), Iota(50, 6)), {3, 3, 3, 3, 3, 3, 3, 3}};
  SeqId next_id = 1;
  auto compute = [&](SeqId id, int upto) {
    const VecTokens& toks = live[id];
    const auto& table = bm.BlockTable(id);
    for (int pos = computed[id]; pos < upto; ++pos) {
      const std::int32_t b = table.at(pos / kTpb);
      ASSERT_EQ(bm.RefCount(b), 1) << "writing to shared block " << b << " seed " << seed;
      written[b] = VecTokens(toks.begin(), toks.begin() + pos + 1);
    }
    computed[id] = upto;
    bm.CommitTokens(id, toks, upto);
  };
  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 4 || live.empty()) {
      VecTokens p = prefixes[rng() % prefixes.size()];
      const int extra = static_cast<int>(rng() % 7);
      for (int i = 0; i < extra; ++i) p.push_back(static_cast<TokenIdType>(rng() % 3));
      const SeqId id = next_id++;
      const std::int64_t free_before = bm.NumFreeBlocks();
      const auto reused = bm.AllocatePrompt(id, p);
      if (!reused) {
        ASSERT_FALSE(bm.HasSequence(id));
        ASSERT_EQ(bm.NumFreeBlocks(), free_before);
        continue;
      }
      ASSERT_EQ(*reused % kTpb, 0);
      ASSERT_LT(*reused, static_cast<int>(p.size()));
      const auto& table = bm.BlockTable(id);
      for (int i = 0; i < *reused / kTpb; ++i) {
        const VecTokens expected(p.begin(), p.begin() + (i + 1) * kTpb);
        ASSERT_EQ(written[table[i]], expected) << "block " << table[i] << " seed " << seed;
      }
      live[id] = p;
      computed[id] = *reused;
      compute(id, static_cast<int>(p.size()) - static_cast<int>(rng() % 2));
    } else if (op < 8) {
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      const SeqId id = it->first;
      if (computed[id] < static_cast<int>(it->second.size())) {
        compute(id, static_cast<int>(it->second.size()));
      } else if (bm.EnsureCapacity(id, static_cast<std::int32_t>(it->second.size()) + 1)) {
        it->second.push_back(static_cast<TokenIdType>(rng() % 3));
        compute(id, static_cast<int>(it->second.size()));
      }
    } else {
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      bm.Free(it->first);
      computed.erase(it->first);
      live.erase(it);
    }
    ASSERT_EQ(bm.CheckInvariants(), "") << "seed " << seed << " step " << step;
  }
  for (const auto& [id, toks] : live) bm.Free(id);
  EXPECT_EQ(bm.NumFreeBlocks(), bm.num_blocks());
  EXPECT_EQ(bm.CheckInvariants(), "");
  EXPECT_GT(bm.Stats().reused_blocks, 0) << "the stress test should exercise reuse";
}

TEST(BlockManagerTest, RandomizedStressKeepsInvariants) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) RunStress(seed, nullptr);
}

TEST(BlockManagerTest, RandomizedStressWithCollidingHashes) {
  auto weak = [](std::uint64_t parent, std::span<const TokenIdType> tokens) -> std::uint64_t {
    std::uint64_t sum = parent;
    for (TokenIdType t : tokens) sum += static_cast<std::uint64_t>(t);
    return sum % 3;
  };
  for (std::uint32_t seed = 11; seed <= 14; ++seed) RunStress(seed, weak);
}

}  // namespace
}  // namespace inflight::kv_cache
