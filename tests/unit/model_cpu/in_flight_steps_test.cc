// Host logic of the CUDA runner's micro-batches in flight: the slot ring (model/in_flight_slots.h)
// and the result message from the last pipeline stage (model/step_result_message.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/in_flight_slots.h"
#include "model/step_result_message.h"

namespace inflight::model {
namespace {

TEST(InFlightSlotsTest, TakesInLaunchOrderAndReleasesOldestFirst) {
  InFlightSlots slots(3);
  EXPECT_TRUE(slots.empty());
  EXPECT_FALSE(slots.Oldest().ok());
  EXPECT_EQ(*slots.Take(), 0);
  EXPECT_EQ(*slots.Take(), 1);
  EXPECT_EQ(*slots.Take(), 2);
  EXPECT_EQ(slots.in_flight(), 3);
  const auto full = slots.Take();
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("the most this runner keeps at once (3)"),
            std::string::npos)
      << full.status().message();
  EXPECT_EQ(*slots.Oldest(), 0);
  slots.ReleaseOldest();
  // The freed slot comes back after the ones still in flight: wrap-around.
  EXPECT_EQ(*slots.Take(), 0);
  EXPECT_EQ(*slots.Oldest(), 1);
  slots.ReleaseOldest();
  EXPECT_EQ(*slots.Oldest(), 2);
  slots.ReleaseOldest();
  EXPECT_EQ(*slots.Oldest(), 0);
  slots.ReleaseOldest();
  EXPECT_TRUE(slots.empty());
  slots.ReleaseOldest();  // nothing in flight: no effect
  EXPECT_EQ(*slots.Take(), 1);
  EXPECT_EQ(*slots.Take(), 2);
  slots.ReleaseNewest();  // a launch that failed: its slot is the next one taken
  EXPECT_EQ(slots.in_flight(), 1);
  EXPECT_EQ(*slots.Take(), 2);
  EXPECT_EQ(*slots.Oldest(), 1);
}

TEST(InFlightSlotsTest, AlternatesOverManySteps) {
  // A pipeline of 2 keeps 2 in flight: launch, launch, then complete one and launch one.
  InFlightSlots slots(2);
  std::vector<std::int32_t> launched;
  launched.push_back(*slots.Take());
  launched.push_back(*slots.Take());
  for (int step = 2; step < 11; ++step) {
    EXPECT_EQ(*slots.Oldest(), launched[static_cast<std::size_t>(step - 2)]);
    slots.ReleaseOldest();
    launched.push_back(*slots.Take());
    EXPECT_EQ(launched.back(), step % 2);
  }
}

TEST(InFlightSlotsTest, BeginsOneLaunchAtATimeAndAbandonGivesItsSlotBack) {
  InFlightSlots slots(2);
  EXPECT_FALSE(slots.begun().ok());  // Post without Begin
  EXPECT_EQ(*slots.Begin(), 0);
  EXPECT_EQ(*slots.begun(), 0);
  const auto twice = slots.Begin();
  ASSERT_FALSE(twice.ok());  // a second Begin before Post
  EXPECT_NE(twice.status().message().find("before the previous one was posted"), std::string::npos)
      << twice.status().message();
  EXPECT_EQ(slots.in_flight(), 1);
  slots.Posted();
  EXPECT_FALSE(slots.begun().ok());
  slots.Abandon();  // nothing begun: the posted step stays in flight
  EXPECT_EQ(slots.in_flight(), 1);

  EXPECT_EQ(*slots.Begin(), 1);
  slots.Abandon();  // the launch failed: slot 1 is free again, slot 0 still in flight
  EXPECT_EQ(slots.in_flight(), 1);
  EXPECT_FALSE(slots.begun().ok());
  EXPECT_EQ(*slots.Begin(), 1);
  slots.Posted();
  EXPECT_FALSE(slots.Begin().ok());  // both slots in flight
  EXPECT_FALSE(slots.begun().ok());  // and the refused Begin holds nothing
  EXPECT_EQ(*slots.Oldest(), 0);
}

TEST(StepResultMessageTest, RoundTripsLogitsTokensAndLogProbs) {
  StepOutput sent;
  sent.logits = {0.5f, -1.25f, 3.0f, std::numeric_limits<float>::infinity(), -0.0f, 7.0f};
  sent.sampled_tokens = {17, -1, 50256};  // -1: a sequence that was not sampled
  sent.sampled_log_probs = {-0.125f, std::numeric_limits<float>::quiet_NaN(), -3.5f};
  ASSERT_EQ(StepResultCount(sent), 12u);
  std::vector<float> message(StepResultCount(sent), 99.0f);
  PackStepResult(sent, message.data());
  EXPECT_EQ(message[0], 0.5f);
  EXPECT_EQ(message[9], -0.125f);  // log-probs follow the 3 token words

  StepOutput got;  // shaped as the first stage shapes it from the StepInput
  got.logits.assign(6, 0.0f);
  got.sampled_tokens.assign(3, -7);
  UnpackStepResult(message.data(), got);
  for (std::size_t i = 0; i < sent.logits.size(); ++i) {
    EXPECT_EQ(std::signbit(got.logits[i]), std::signbit(sent.logits[i])) << i;
    EXPECT_EQ(got.logits[i], sent.logits[i]) << i;
  }
  EXPECT_EQ(got.sampled_tokens, sent.sampled_tokens);
  ASSERT_EQ(got.sampled_log_probs.size(), 3u);
  EXPECT_EQ(got.sampled_log_probs[0], -0.125f);
  EXPECT_TRUE(std::isnan(got.sampled_log_probs[1]));
  EXPECT_EQ(got.sampled_log_probs[2], -3.5f);
}

TEST(StepResultMessageTest, LogitsOnlyAndEmpty) {
  StepOutput sent;
  sent.logits = {1.0f, 2.0f};
  EXPECT_EQ(StepResultCount(sent), 2u);
  std::vector<float> message(2);
  PackStepResult(sent, message.data());
  StepOutput got;
  got.logits.assign(2, 0.0f);
  UnpackStepResult(message.data(), got);
  EXPECT_EQ(got.logits, sent.logits);
  EXPECT_TRUE(got.sampled_tokens.empty());
  EXPECT_EQ(StepResultCount(StepOutput{}), 0u);
}

}  // namespace
}  // namespace inflight::model
