// The CPU runner's KV pool per rank (executor/cpu_kv_sizing.h): a rank pays for its own shard's
// layers and kv heads only, and the group's smallest pool bounds what the leader schedules.
#include "executor/cpu_kv_sizing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace inflight::executor {
namespace {

// 4 layers, 8 kv heads of 64: 2 x 4 x 8 x 64 x 4 = 16 KiB per token for the whole engine.
model::EngineConfig Engine(std::int32_t tp, std::int32_t pp, std::int64_t num_layers = 4) {
  model::EngineConfig c;
  c.vocab_size = 1000;
  c.hidden_size = 512;
  c.num_layers = num_layers;
  c.num_attention_heads = 8;
  c.num_kv_heads = 8;
  c.head_dim = 64;
  c.intermediate_size = 1024;
  c.tp_size = tp;
  c.pp_size = pp;
  c.build.max_batch_size = 1024;
  c.build.max_seq_len = 4096;  // full length: 4M tokens, far over the byte cap
  c.build.tokens_per_block = 64;
  return c;
}

CpuKvCacheSize Size(const model::EngineConfig& c, std::int32_t tp_rank, std::int32_t pp_rank,
                    const KvCacheConfig& kv = {}) {
  Result<model::ModelShard> shard =
      model::MakeModelShard(c, tp_rank, c.tp_size, pp_rank, c.pp_size);
  EXPECT_TRUE(shard.ok()) << shard.status().message();
  Result<CpuKvCacheSize> size = SizeCpuKvCache(c, *shard, kv);
  EXPECT_TRUE(size.ok()) << size.status().message();
  return *size;
}

TEST(CpuKvSizingTest, OneRankPaysForEveryLayer) {
  const CpuKvCacheSize s = Size(Engine(1, 1), 0, 0);
  EXPECT_EQ(s.bytes_per_token, 2 * 4 * 8 * 64 * 4);
  EXPECT_EQ(s.tokens, kDefaultCpuKvCacheBytes / s.bytes_per_token);  // 65536
}

TEST(CpuKvSizingTest, AStageOfHalfTheLayersHoldsTwiceTheTokens) {
  const model::EngineConfig c = Engine(1, 2);
  const CpuKvCacheSize whole = Size(Engine(1, 1), 0, 0);
  for (std::int32_t stage : {0, 1}) {
    const CpuKvCacheSize s = Size(c, 0, stage);
    EXPECT_EQ(s.bytes_per_token, whole.bytes_per_token / 2) << "stage " << stage;
    EXPECT_EQ(s.tokens, 2 * whole.tokens) << "stage " << stage;
  }
}

TEST(CpuKvSizingTest, ATensorParallelRankPaysForItsKvHeadsOnly) {
  const CpuKvCacheSize whole = Size(Engine(1, 1), 0, 0);
  const CpuKvCacheSize s = Size(Engine(2, 2), 1, 1);  // 2 of 4 layers, 4 of 8 kv heads
  EXPECT_EQ(s.bytes_per_token, whole.bytes_per_token / 4);
  EXPECT_EQ(s.tokens, 4 * whole.tokens);
}

// 5 layers over 2 stages: layers [0, 2) and [2, 5). The stage of three layers has the smaller
// pool, and that is what every rank may be handed (the leader takes the group's minimum).
TEST(CpuKvSizingTest, UnevenStagesDifferAndTheSmallestBoundsTheGroup) {
  const model::EngineConfig c = Engine(1, 2, /*num_layers=*/5);
  const CpuKvCacheSize first = Size(c, 0, 0), second = Size(c, 0, 1);
  EXPECT_EQ(first.bytes_per_token, 2 * 2 * 8 * 64 * 4);
  EXPECT_EQ(second.bytes_per_token, 2 * 3 * 8 * 64 * 4);
  EXPECT_GT(first.tokens, second.tokens);
  const std::int64_t group = std::min(first.tokens, second.tokens) / c.build.tokens_per_block;
  EXPECT_EQ(group, second.tokens / c.build.tokens_per_block);
  // Each stage holds the group's blocks in full: no stage is handed a block it lacks.
  EXPECT_LE(group * c.build.tokens_per_block * second.bytes_per_token, kDefaultCpuKvCacheBytes);
}

TEST(CpuKvSizingTest, FullLengthForEveryRequestCapsThePool) {
  model::EngineConfig c = Engine(1, 2);
  c.build.max_batch_size = 4;
  c.build.max_seq_len = 128;
  EXPECT_EQ(Size(c, 0, 1).tokens, 4 * 128);
}

TEST(CpuKvSizingTest, MaxTokensIsTakenAsGivenOnEveryRank) {
  KvCacheConfig kv;
  kv.max_tokens = 1000;
  const model::EngineConfig c = Engine(1, 2);
  EXPECT_EQ(Size(c, 0, 0, kv).tokens, 1000);
  EXPECT_EQ(Size(c, 0, 1, kv).tokens, 1000);
  kv.max_tokens = 10;
  Result<model::ModelShard> shard = model::MakeModelShard(c, 0, 1, 0, 2);
  ASSERT_TRUE(shard.ok());
  Result<CpuKvCacheSize> size = SizeCpuKvCache(c, *shard, kv);
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.status().message().find("max_tokens_in_paged_kv_cache 10"), std::string::npos)
      << size.status().message();
}

TEST(CpuKvSizingTest, Fp8KvCacheHoldsFourTimesTheTokens) {
  model::EngineConfig c = Engine(1, 2);
  const CpuKvCacheSize fp32 = Size(c, 0, 0);
  c.quant.kv_cache_fp8 = true;
  const CpuKvCacheSize fp8 = Size(c, 0, 0);
  EXPECT_EQ(fp8.bytes_per_token * 4, fp32.bytes_per_token);
  EXPECT_EQ(fp8.tokens, 4 * fp32.tokens);
}

}  // namespace
}  // namespace inflight::executor
