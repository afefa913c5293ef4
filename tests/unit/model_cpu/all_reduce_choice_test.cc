// The GPU all-reduce's transport rule (model/all_reduce_choice.h): the environment switch's
// values, and NCCL vs IPC one-shot / two-shot by size, ranks, capacity and alignment.
#include "model/all_reduce_choice.h"

#include <gtest/gtest.h>

namespace inflight::model {
namespace {

TEST(AllReduceChoiceTest, ParsesTheSwitch) {
  EXPECT_EQ(*ParseAllReduceMode(nullptr, "INFLIGHT_ALLREDUCE"), AllReduceMode::kAuto);
  EXPECT_EQ(*ParseAllReduceMode("", "INFLIGHT_ALLREDUCE"), AllReduceMode::kAuto);
  EXPECT_EQ(*ParseAllReduceMode("auto", "x"), AllReduceMode::kAuto);
  EXPECT_EQ(*ParseAllReduceMode("nccl", "x"), AllReduceMode::kNccl);
  EXPECT_EQ(*ParseAllReduceMode("ipc", "x"), AllReduceMode::kIpc);
  EXPECT_EQ(*ParseAllReduceMode("ipc_oneshot", "x"), AllReduceMode::kIpcOneShot);
  EXPECT_EQ(*ParseAllReduceMode("ipc_twoshot", "x"), AllReduceMode::kIpcTwoShot);
  const auto bad = ParseAllReduceMode("NCCL", "INFLIGHT_ALLREDUCE");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "INFLIGHT_ALLREDUCE \"NCCL\" is not one of: auto, nccl, ipc, ipc_oneshot, ipc_twoshot");
}

TEST(AllReduceChoiceTest, AutoTakesIpcForSmallMessagesOnly) {
  constexpr std::int64_t kCap = 8 << 20;
  AllReduceThresholds t;
  t.ipc_max_bytes = 4 << 20;
  t.one_shot_max_bytes = 256 << 10;
  const auto choose = [&](std::int64_t bytes, int ranks) {
    return ChooseAllReducePath(AllReduceMode::kAuto, bytes, ranks, kCap, true, t);
  };
  // Two ranks: one-shot up to the IPC limit (two-shot reads as much and waits twice).
  EXPECT_EQ(choose(2, 2), AllReducePath::kIpcOneShot);
  EXPECT_EQ(choose(4 << 20, 2), AllReducePath::kIpcOneShot);
  EXPECT_EQ(choose((4 << 20) + 2, 2), AllReducePath::kNccl);
  // More ranks: two-shot above the one-shot limit.
  EXPECT_EQ(choose(256 << 10, 4), AllReducePath::kIpcOneShot);
  EXPECT_EQ(choose((256 << 10) + 2, 4), AllReducePath::kIpcTwoShot);
  EXPECT_EQ(choose((4 << 20) + 2, 8), AllReducePath::kNccl);
}

TEST(AllReduceChoiceTest, ForcedModesAndWhereIpcCannotRun) {
  constexpr std::int64_t kCap = 1 << 20;
  const auto choose = [&](AllReduceMode m, std::int64_t bytes, std::int64_t cap, bool aligned) {
    return ChooseAllReducePath(m, bytes, 2, cap, aligned);
  };
  EXPECT_EQ(choose(AllReduceMode::kNccl, 64, kCap, true), AllReducePath::kNccl);
  EXPECT_EQ(choose(AllReduceMode::kIpcTwoShot, 64, kCap, true), AllReducePath::kIpcTwoShot);
  EXPECT_EQ(choose(AllReduceMode::kIpcOneShot, kCap, kCap, true), AllReducePath::kIpcOneShot);
  // ipc ignores the auto size limit but not the buffer's capacity.
  AllReduceThresholds small;
  small.ipc_max_bytes = 1024;
  EXPECT_EQ(ChooseAllReducePath(AllReduceMode::kIpc, 4096, 2, kCap, true, small),
            AllReducePath::kIpcOneShot);
  EXPECT_EQ(ChooseAllReducePath(AllReduceMode::kAuto, 4096, 2, kCap, true, small),
            AllReducePath::kNccl);
  for (AllReduceMode m : {AllReduceMode::kAuto, AllReduceMode::kIpc, AllReduceMode::kIpcOneShot,
                          AllReduceMode::kIpcTwoShot}) {
    EXPECT_EQ(choose(m, kCap + 2, kCap, true), AllReducePath::kNccl) << AllReduceModeName(m);
    EXPECT_EQ(choose(m, 64, 0, true), AllReducePath::kNccl) << "no IPC on this group";
    EXPECT_EQ(choose(m, 64, kCap, false), AllReducePath::kNccl) << "misaligned buffer";
    EXPECT_EQ(ChooseAllReducePath(m, 64, 1, kCap, true), AllReducePath::kNccl) << "one rank";
  }
}

}  // namespace
}  // namespace inflight::model
