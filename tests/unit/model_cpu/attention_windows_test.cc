// ResolveAttentionWindows: the engine's sliding windows combined with the runtime's
// max_attention_window_size (repeated over the layers) and sink_token_length, exact per layer,
// and every refusal naming its field and value.
#include <gtest/gtest.h>

#include "model/attention_windows.h"

namespace inflight::model {
namespace {

using kernels::cpu::AttentionWindow;

EngineConfig Config(std::int64_t layers, std::vector<std::int64_t> engine_windows = {}) {
  EngineConfig c;
  c.num_layers = layers;
  c.attention_windows = std::move(engine_windows);
  c.build.max_seq_len = 4096;
  return c;
}

std::vector<std::pair<std::int32_t, std::int32_t>> Pairs(const std::vector<AttentionWindow>& w) {
  std::vector<std::pair<std::int32_t, std::int32_t>> out;
  for (const AttentionWindow& x : w) out.emplace_back(x.window, x.sink);
  return out;
}

using P = std::vector<std::pair<std::int32_t, std::int32_t>>;

TEST(AttentionWindows, NoWindowsAnywhereIsFullAttention) {
  auto w = ResolveAttentionWindows(Config(3), {});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(Pairs(*w), (P{{0, 0}, {0, 0}, {0, 0}}));
  EXPECT_EQ(DescribeAttentionWindows(*w), "");
}

TEST(AttentionWindows, EngineWindowsPerLayer) {
  // Mistral-style everywhere, and a Qwen2-style mix of full and windowed layers.
  auto all = ResolveAttentionWindows(Config(2, {16, 16}), {});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(Pairs(*all), (P{{16, 0}, {16, 0}}));
  auto mixed = ResolveAttentionWindows(Config(4, {0, 0, 64, 64}), {});
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(Pairs(*mixed), (P{{0, 0}, {0, 0}, {64, 0}, {64, 0}}));
  EXPECT_EQ(DescribeAttentionWindows(*mixed), "layers 2-3: window 64");
}

TEST(AttentionWindows, RuntimeLimitRepeatsOverTheLayersAndTheSmallerWins) {
  AttentionLimits limits;
  limits.max_attention_window = {100, 2000};
  auto w = ResolveAttentionWindows(Config(5, {0, 0, 50, 3000, 0}), limits);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(Pairs(*w), (P{{100, 0}, {2000, 0}, {50, 0}, {2000, 0}, {100, 0}}));
}

TEST(AttentionWindows, LimitsAtOrPastMaxSeqLenKeepFullAttention) {
  AttentionLimits limits;
  limits.max_attention_window = {4096, 5000, 4095};
  auto w = ResolveAttentionWindows(Config(3, {0, 8192, 0}), limits);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(Pairs(*w), (P{{0, 0}, {0, 0}, {4095, 0}}));
}

TEST(AttentionWindows, SinksCountAmongTheWindowsKeys) {
  AttentionLimits limits;
  limits.max_attention_window = {1024};
  limits.sink_token_length = 4;
  auto w = ResolveAttentionWindows(Config(2, {16, 0}), limits);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(Pairs(*w), (P{{12, 4}, {1020, 4}}));
  EXPECT_EQ(DescribeAttentionWindows(*w),
            "layer 0: window 12 + 4 sinks, layer 1: window 1020 + 4 sinks");
  // Sinks without any window: nothing is dropped, so nothing changes.
  AttentionLimits sinks_only;
  sinks_only.sink_token_length = 4;
  auto full = ResolveAttentionWindows(Config(2), sinks_only);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(Pairs(*full), (P{{0, 0}, {0, 0}}));
}

TEST(AttentionWindows, RefusalsNameTheFieldAndValue) {
  AttentionLimits too_long;
  too_long.max_attention_window = {8, 8, 8};
  EXPECT_EQ(ResolveAttentionWindows(Config(2), too_long).status().message(),
            "max_attention_window_size has 3 values, more than the engine's 2 layers; give one "
            "value, or up to one per layer (repeated over the layers when shorter)");
  AttentionLimits zero;
  zero.max_attention_window = {0};
  EXPECT_EQ(ResolveAttentionWindows(Config(2), zero).status().message(),
            "max_attention_window_size 0 is out of range: must be >= 1");
  AttentionLimits negative_sink;
  negative_sink.sink_token_length = -1;
  EXPECT_EQ(ResolveAttentionWindows(Config(2), negative_sink).status().message(),
            "sink_token_length -1 is out of range: must be >= 0");
  AttentionLimits all_sinks;
  all_sinks.max_attention_window = {64};
  all_sinks.sink_token_length = 16;
  EXPECT_EQ(ResolveAttentionWindows(Config(2, {0, 16}), all_sinks).status().message(),
            "sink_token_length 16 leaves layer 1 no recent key: its attention window is 16 keys "
            "(the engine's sliding window 16, max_attention_window_size 64), and the sinks count "
            "among those keys; sink_token_length must be smaller");
}

}  // namespace
}  // namespace inflight::model
