// Host checks of lookahead (model/lookahead_tokens.h, model/step_validation.h): which of a step's
// tokens come from the device samples of the step launched just before, and the refusals that
// name the row, the sequence and what the step before had.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/lookahead_tokens.h"
#include "model/step_validation.h"

namespace inflight::model {
namespace {

SequenceStep Decode(std::int32_t previous_step_row, std::int32_t num_cached = 4) {
  SequenceStep s;
  s.seq_id = 100 + previous_step_row;
  s.tokens = {-1};  // a placeholder
  s.num_cached = num_cached;
  s.block_table = {0, 1};
  s.previous_step_row = previous_step_row;
  return s;
}

// A step of four sequences whose 0, 2 and 3 were sampled on the device, into words 0, 1, 2.
SampledWords Previous() {
  static const std::int32_t fake_device_words[3] = {};
  SampledWords p;
  p.words = fake_device_words;
  p.word_of_sequence = {0, -1, 1, 2};
  return p;
}

void ExpectRefused(const Result<SampledWords>& got, const std::string& expect) {
  ASSERT_FALSE(got.ok()) << expect;
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find(expect), std::string::npos) << got.status().message();
}

TEST(LookaheadTokensTest, MapsRowsToThePreviousStepsWords) {
  const SampledWords previous = Previous();
  StepInput step;
  step.sequences.push_back(Decode(3));
  SequenceStep given = Decode(-1);
  given.tokens = {7};
  step.sequences.push_back(given);
  step.sequences.push_back(Decode(0));
  const auto got = ResolvePreviousStepRows(step, &previous);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->words, previous.words);
  EXPECT_EQ(got->word_of_sequence, (std::vector<std::int32_t>{2, -1, 0}));
  EXPECT_TRUE(got->any());
}

TEST(LookaheadTokensTest, NoRowsNeedNoPreviousStep) {
  StepInput step;
  SequenceStep given = Decode(-1);
  given.tokens = {1, 2, 3};
  step.sequences.push_back(given);
  const auto got = ResolvePreviousStepRows(step, nullptr);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got->any());
  EXPECT_EQ(got->word_of_sequence, (std::vector<std::int32_t>{-1}));
}

TEST(LookaheadTokensTest, RefusesRowsThePreviousStepDidNotSample) {
  const SampledWords previous = Previous();
  StepInput step;
  step.sequences.push_back(Decode(0));
  step.sequences.push_back(Decode(5));
  ExpectRefused(ResolvePreviousStepRows(step, &previous),
                "previous_step_row 5 of sequence 1 (seq_id 105): the step launched before had 4 "
                "sequences");
  step.sequences[1] = Decode(1);
  ExpectRefused(ResolvePreviousStepRows(step, &previous),
                "previous_step_row 1 of sequence 1 (seq_id 101): sequence 1 of the step launched "
                "before had no device_sampling");
  step.sequences[1].tokens = {1, 2};
  ExpectRefused(ResolvePreviousStepRows(step, &previous), "the sequence has 2 tokens");
  ExpectRefused(ResolvePreviousStepRows(step, nullptr), "previous_step_row 0 of sequence 0");
  step.sequences.resize(1);
  ExpectRefused(ResolvePreviousStepRows(step, nullptr), "no step was launched before");
  SampledWords empty;
  ExpectRefused(ResolvePreviousStepRows(step, &empty), "the step launched before had 0 sequences");
}

TEST(LookaheadTokensTest, ValidationAcceptsPlaceholdersOnlyWithLookahead) {
  EngineConfig config;
  config.vocab_size = 50;
  config.build.tokens_per_block = 4;
  StepInput step;
  step.sequences.push_back(Decode(2));
  EXPECT_TRUE(ValidateStepInput(step, config, 8, /*lookahead=*/true).ok());
  const Status off = ValidateStepInput(step, config, 8);
  ASSERT_FALSE(off.ok());
  EXPECT_NE(off.message().find("sequence 0 (seq_id 102): previous_step_row is 2, but this runner "
                               "has no lookahead"),
            std::string::npos)
      << off.message();
  step.sequences[0].tokens = {3, 4};
  const Status two = ValidateStepInput(step, config, 8, /*lookahead=*/true);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.message().find("previous_step_row is 2 with 2 tokens"), std::string::npos)
      << two.message();
  // Without a row, the tokens are checked as ever.
  step.sequences[0] = Decode(-1);
  const Status placeholder = ValidateStepInput(step, config, 8, /*lookahead=*/true);
  ASSERT_FALSE(placeholder.ok());
  EXPECT_NE(placeholder.message().find("token 0 is id -1"), std::string::npos)
      << placeholder.message();
}

}  // namespace
}  // namespace inflight::model
