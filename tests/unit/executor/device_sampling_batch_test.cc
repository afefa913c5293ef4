// The CUDA runner's host-side packing of device sampling (model/device_sampling_batch.h): each
// row's SamplingParams must point at its own (token, count) pairs and bans in the shared list,
// carry the request's Philox draw and knobs, and reject inconsistent inputs. Host code only: runs
// without a device.
#include "model/device_sampling_batch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "executor/sampling/philox.h"

namespace inflight::model {
namespace {

TEST(DeviceSamplingBatch, RowsIndexTheirOwnListsInOneArray) {
  DeviceSamplingBatch batch;
  DeviceSampling a;
  a.greedy = true;
  a.temperature = 0.5f;
  a.seed = 9;
  a.draw_index = 3;
  a.repetition_penalty = 1.2f;
  a.penalty_tokens = {4, 8};
  a.penalty_counts = {0, 2};
  a.banned_tokens = {1};
  DeviceSampling b;
  b.top_k = 7;
  b.top_p = 0.9f;
  b.presence_penalty = -0.5f;
  b.frequency_penalty = 0.25f;
  b.normalize_log_probs = false;
  b.banned_tokens = {2, 3};
  const float* bias = reinterpret_cast<const float*>(std::uintptr_t{0x1000});
  ASSERT_TRUE(batch.Add(a, nullptr).ok());
  ASSERT_TRUE(batch.Add(b, bias).ok());
  batch.AddPadding();
  EXPECT_EQ(batch.lists(), (std::vector<std::int32_t>{4, 0, 8, 2, 1, 2, 3}));
  ASSERT_EQ(batch.params().size(), 3u);
  const kernels::cuda::SamplingParams& pa = batch.params()[0];
  EXPECT_EQ(pa.embedding_bias, nullptr);
  EXPECT_EQ(pa.uniform, sampling::PhiloxUniform(9, 3));
  EXPECT_EQ(pa.greedy, 1);
  EXPECT_EQ(pa.temperature, 0.5f);
  EXPECT_EQ(pa.repetition_penalty, 1.2f);
  EXPECT_EQ(pa.penalty_offset, 0);
  EXPECT_EQ(pa.num_penalty_tokens, 2);
  EXPECT_EQ(pa.ban_offset, 4);
  EXPECT_EQ(pa.num_banned, 1);
  EXPECT_EQ(pa.normalize_log_prob, 1);
  const kernels::cuda::SamplingParams& pb = batch.params()[1];
  EXPECT_EQ(pb.embedding_bias, bias);
  EXPECT_EQ(pb.uniform, sampling::PhiloxUniform(0, 0));
  EXPECT_EQ(pb.greedy, 0);
  EXPECT_EQ(pb.top_k, 7);
  EXPECT_EQ(pb.top_p, 0.9f);
  EXPECT_EQ(pb.presence_penalty, -0.5f);
  EXPECT_EQ(pb.frequency_penalty, 0.25f);
  EXPECT_EQ(pb.num_penalty_tokens, 0);
  EXPECT_EQ(pb.ban_offset, 5);
  EXPECT_EQ(pb.num_banned, 2);
  EXPECT_EQ(pb.normalize_log_prob, 0);
  const kernels::cuda::SamplingParams& pad = batch.params()[2];
  EXPECT_EQ(pad.greedy, 1);
  EXPECT_EQ(pad.num_penalty_tokens, 0);
  EXPECT_EQ(pad.num_banned, 0);
  EXPECT_EQ(pad.embedding_bias, nullptr);

  batch.Clear();
  EXPECT_TRUE(batch.params().empty());
  EXPECT_TRUE(batch.lists().empty());
  EXPECT_EQ(DeviceSamplingBatch::ListWords(a), 5u);
}

TEST(DeviceSamplingBatch, RejectsCountsThatDoNotMatchTheTokens) {
  DeviceSamplingBatch batch;
  DeviceSampling d;
  d.penalty_tokens = {1, 2};
  d.penalty_counts = {1};
  const Status st = batch.Add(d, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_TRUE(batch.params().empty());
}

}  // namespace
}  // namespace inflight::model
