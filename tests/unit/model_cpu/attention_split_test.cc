// The attention split's arithmetic: the work counts against brute force, and the choice against
// the splits an H100 measured fastest (bench/results/2026-11-21-h100-round-9.md).
#include "model/attention_split.h"

#include <gtest/gtest.h>

#include <random>

namespace inflight::model {
namespace {

const std::vector<int> kOffered = {16, 24, 32, 40, 48, 56, 64};
// H100: 132 SMs, attribute peak 3,352 GB/s.
const AttentionRates kH100 = HopperAttentionRates(132, 3352e6);

TEST(AttentionSplit, ContextFlopsCountEveryCausalKey) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const std::int64_t q = 1 + rng() % 300, cached = rng() % 500, heads = 1 + rng() % 8;
    double keys = 0;
    for (std::int64_t r = 0; r < q; ++r) keys += static_cast<double>(cached + r + 1);
    EXPECT_DOUBLE_EQ(ContextAttentionFlops(q, cached, heads, 128), 4.0 * keys * heads * 128)
        << "q " << q << " cached " << cached;
  }
  EXPECT_DOUBLE_EQ(DecodeAttentionBytes(2112, 8, 128, 2), 2112.0 * 8 * 128 * 2 * 2);
}

AttentionWork Step(std::int64_t chunks, std::int64_t chunk_rows, std::int64_t decodes,
                   std::int64_t keys) {
  AttentionWork w;
  w.context_flops = static_cast<double>(chunks) * ContextAttentionFlops(chunk_rows, 0, 32, 128);
  w.decode_bytes = static_cast<double>(decodes) * DecodeAttentionBytes(keys, 8, 128, 2);
  return w;
}

// The context side on N SMs, the decode side on all (bench/results/2026-11-21-h100-round-9.md).
// The SMs picked for the context side, 0 for none.
int PickedSms(const AttentionWork& w) {
  const int i = ChooseAttentionSplit(w, kH100, kOffered);
  return i < 0 ? 0 : kOffered[static_cast<std::size_t>(i)];
}

TEST(AttentionSplit, PicksSplitsMeasuredAmongTheFastest) {
  // 2 x 1790 prompt rows beside 223 decodes of 2112 keys: 0.809 ms in turn; 32, 40 and 48 SMs
  // 0.749-0.752, 24 0.790, 16 1.143.
  const int a = PickedSms(Step(2, 1790, 223, 2112));
  EXPECT_TRUE(a >= 32 && a <= 48) << a;
  // 1 x 2048: 0.755 in turn; 16-40 SMs 0.714-0.728.
  const int b = PickedSms(Step(1, 2048, 223, 2112));
  EXPECT_TRUE(b >= 16 && b <= 40) << b;
  // 2 x 2048: 0.838 in turn; 32-48 SMs 0.750-0.764, 24 0.943, 16 1.403.
  const int c = PickedSms(Step(2, 2048, 223, 2112));
  EXPECT_TRUE(c >= 32 && c <= 48) << c;
}

TEST(AttentionSplit, StaysInTurnWhenOneSideIsSmallOrEmpty) {
  EXPECT_EQ(ChooseAttentionSplit(Step(1, 128, 223, 2112), kH100, kOffered), -1);
  EXPECT_EQ(ChooseAttentionSplit(Step(2, 1790, 0, 2112), kH100, kOffered), -1);
  EXPECT_EQ(ChooseAttentionSplit(Step(0, 1790, 223, 2112), kH100, kOffered), -1);
  // A few short decodes beside a long prompt: the decode side is too small to hide anything.
  EXPECT_EQ(ChooseAttentionSplit(Step(1, 4096, 2, 512), kH100, kOffered), -1);
  // No offer is a part of the device.
  EXPECT_EQ(ChooseAttentionSplit(Step(2, 1790, 223, 2112), kH100, {0, 132, 200}), -1);
}

TEST(AttentionSplit, MoreContextWorkNeverGetsFewerSms) {
  int last = 0;
  for (std::int64_t rows = 512; rows <= 8192; rows += 256) {
    const int sms = PickedSms(Step(1, rows, 223, 2112));
    if (sms > 0) {
      EXPECT_GE(sms, last) << rows << " rows";
      last = sms;
    }
  }
  EXPECT_GT(last, 0);
}

}  // namespace
}  // namespace inflight::model
