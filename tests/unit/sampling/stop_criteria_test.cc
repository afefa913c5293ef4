#include "executor/sampling/stop_criteria.h"

#include <gtest/gtest.h>

#include <vector>

namespace inflight::sampling {
namespace {

Request MakeRequest() {
  Request r;
  r.input_token_ids = {4, 5};
  r.max_tokens = 5;
  r.end_id = 2;
  r.stop_words = {{4, 5, 6}, {9}};
  return r;
}

void ExpectOutcome(const StepOutcome& got, bool append, FinishReason reason) {
  EXPECT_EQ(got.append_token, append);
  EXPECT_EQ(static_cast<int>(got.finish_reason), static_cast<int>(reason));
}

TEST(StopCriteria, EndIdIsNotAppended) {
  const Request req = MakeRequest();
  const VecTokens generated = {7};
  ExpectOutcome(EvaluateStep(2, generated, MakeStopCriteria(req)), false, FinishReason::kEndId);
  ExpectOutcome(EvaluateStep(3, generated, MakeStopCriteria(req)), true,
                FinishReason::kNotFinished);
}

TEST(StopCriteria, NoEndIdNeverStopsOnAToken) {
  Request req = MakeRequest();
  req.end_id.reset();
  const VecTokens generated = {7};
  ExpectOutcome(EvaluateStep(2, generated, MakeStopCriteria(req)), true,
                FinishReason::kNotFinished);
}

TEST(StopCriteria, StopWordAcrossTokenBoundaries) {
  const Request req = MakeRequest();
  const StopCriteria c = MakeStopCriteria(req);
  const VecTokens matched = {1, 4, 5};
  ExpectOutcome(EvaluateStep(6, matched, c), true, FinishReason::kStopWords);
  const VecTokens broken = {4, 1, 5};
  ExpectOutcome(EvaluateStep(6, broken, c), true, FinishReason::kNotFinished);
  const VecTokens single = {1};
  ExpectOutcome(EvaluateStep(9, single, c), true, FinishReason::kStopWords);
}

TEST(StopCriteria, PromptDoesNotCount) {
  // The prompt ends with 4 5; generating 6 would complete 4 5 6 only across the prompt boundary.
  const Request req = MakeRequest();
  const StopCriteria c = MakeStopCriteria(req);
  ExpectOutcome(EvaluateStep(6, {}, c), true, FinishReason::kNotFinished);
  const VecTokens one = {5};
  ExpectOutcome(EvaluateStep(6, one, c), true, FinishReason::kNotFinished);
}

TEST(StopCriteria, StopWordsIgnoredBeforeMinTokens) {
  Request req = MakeRequest();
  req.sampling_config.min_tokens = 3;
  const StopCriteria c = MakeStopCriteria(req);
  const VecTokens one = {1};
  ExpectOutcome(EvaluateStep(9, one, c), true, FinishReason::kNotFinished);
  const VecTokens two = {1, 1};
  ExpectOutcome(EvaluateStep(9, two, c), true, FinishReason::kStopWords);
}

TEST(StopCriteria, LengthAtMaxTokens) {
  const Request req = MakeRequest();
  const StopCriteria c = MakeStopCriteria(req);  // max_tokens 5
  const VecTokens three = {1, 1, 1};
  ExpectOutcome(EvaluateStep(3, three, c), true, FinishReason::kNotFinished);
  const VecTokens four = {1, 1, 1, 1};
  ExpectOutcome(EvaluateStep(3, four, c), true, FinishReason::kLength);
}

TEST(StopCriteria, PriorityEndIdThenStopWordsThenLength) {
  const Request req = MakeRequest();
  const StopCriteria c = MakeStopCriteria(req);
  const VecTokens four = {1, 1, 4, 5};
  ExpectOutcome(EvaluateStep(6, four, c), true, FinishReason::kStopWords);
  ExpectOutcome(EvaluateStep(2, four, c), false, FinishReason::kEndId);
}

TEST(StopCriteria, EndsWithStopWord) {
  const std::vector<VecTokens> words = {{4, 5, 6}, {}};
  const VecTokens yes = {0, 4, 5, 6};
  const VecTokens no = {4, 5, 6, 0};
  EXPECT_TRUE(EndsWithStopWord(yes, words));
  EXPECT_FALSE(EndsWithStopWord(no, words));  // and the empty word matches nothing
  EXPECT_FALSE(EndsWithStopWord({}, words));
}

}  // namespace
}  // namespace inflight::sampling
