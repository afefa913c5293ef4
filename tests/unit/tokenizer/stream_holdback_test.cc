// The LLM model's streamed responses with the GPT-2 tokenizer: ids that end inside a character
// wait, with their per-token outputs, for the response that completes it; the final response takes
// all.
#include "backend/stream_holdback.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "unit/tokenizer/test_data.h"

namespace inflight::backend {
namespace {

using ::testing::ElementsAre;

constexpr int32_t kNiLead = 19526;  // E4 BD: the first two bytes of 你
constexpr int32_t kNiTail = 254;    // A0: its last byte
constexpr int32_t kComma = 11;      // ","

ResponseResult Step(std::vector<int32_t> ids, bool final) {
  ResponseResult r;
  r.is_final = final;
  r.log_probs = {{}};
  for (int32_t id : ids) r.log_probs[0].push_back(-static_cast<float>(id));
  r.vocab_size = 2;
  for (int32_t id : ids) {
    r.generation_logits.push_back(static_cast<float>(id));
    r.generation_logits.push_back(0.5f);
  }
  r.output_token_ids = {std::move(ids)};
  return r;
}

class StreamHoldbackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = tokenizer::Tokenizer::Load(tokenizer::testing::Gpt2Dir());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tokenizer_ = std::move(t).value().release();
  }
  static void TearDownTestSuite() { delete tokenizer_; }
  static tokenizer::Tokenizer* tokenizer_;
};
tokenizer::Tokenizer* StreamHoldbackTest::tokenizer_ = nullptr;

TEST_F(StreamHoldbackTest, IdsEndingInsideACharacterWaitWithTheirOutputs) {
  StreamHoldback holdback(*tokenizer_);
  ResponseResult first = Step({kComma, kNiLead}, false);
  ASSERT_TRUE(holdback.Apply(first));
  EXPECT_THAT(first.output_token_ids[0], ElementsAre(kComma));
  EXPECT_THAT(first.log_probs[0], ElementsAre(-kComma));
  EXPECT_THAT(first.generation_logits, ElementsAre(kComma, 0.5f));

  ResponseResult second = Step({kNiTail, kNiLead}, false);
  ASSERT_TRUE(holdback.Apply(second));
  EXPECT_THAT(second.output_token_ids[0], ElementsAre(kNiLead, kNiTail));
  EXPECT_THAT(second.log_probs[0], ElementsAre(-kNiLead, -kNiTail));
  EXPECT_THAT(second.generation_logits, ElementsAre(kNiLead, 0.5f, kNiTail, 0.5f));

  // Nothing settles: no response at all.
  ResponseResult nothing = Step({}, false);
  EXPECT_FALSE(holdback.Apply(nothing));

  // The end: whatever is held goes out, even a character cut short.
  ResponseResult last = Step({kComma, kNiLead}, true);
  ASSERT_TRUE(holdback.Apply(last));
  EXPECT_THAT(last.output_token_ids[0], ElementsAre(kNiLead, kComma, kNiLead));
  EXPECT_THAT(last.log_probs[0], ElementsAre(-kNiLead, -kComma, -kNiLead));
}

TEST_F(StreamHoldbackTest, ANonFinalResponseWithOnlyALeadPartIsNotSent) {
  StreamHoldback holdback(*tokenizer_);
  ResponseResult lead = Step({kNiLead}, false);
  EXPECT_FALSE(holdback.Apply(lead));
  EXPECT_TRUE(lead.output_token_ids[0].empty());
  ResponseResult tail = Step({kNiTail}, false);
  EXPECT_TRUE(holdback.Apply(tail));
  EXPECT_THAT(tail.output_token_ids[0], ElementsAre(kNiLead, kNiTail));
}

TEST_F(StreamHoldbackTest, SeveralBeamsAreLeftAsTheyAre) {
  StreamHoldback holdback(*tokenizer_);
  ResponseResult beams;
  beams.output_token_ids = {{kNiLead}, {kComma}};
  EXPECT_TRUE(holdback.Apply(beams));
  EXPECT_THAT(beams.output_token_ids[0], ElementsAre(kNiLead));
}

TEST(StreamTokenizerTest, ComesFromTheSiblingPostprocessingModel) {
  config::LlmParams params;
  params.model_name = "tensorrt_llm";
  // No sibling, no tokenizer_dir: ids go out as they come.
  auto none = LoadStreamTokenizer(params, "/nonexistent/repo/tensorrt_llm");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, nullptr);
  // The postprocessing model beside it names the tokenizer.
  const std::filesystem::path repo =
      std::filesystem::temp_directory_path() / ("holdback_repo_" + std::to_string(::getpid()));
  std::filesystem::create_directories(repo / "postprocessing");
  std::filesystem::create_directories(repo / "tensorrt_llm");
  {
    std::ofstream config(repo / "postprocessing" / "config.pbtxt");
    config << "name: \"postprocessing\"\nbackend: \"inflight_tokenizer\"\n"
           << "parameters: { key: \"tokenizer_dir\" value: { string_value: \""
           << tokenizer::testing::Gpt2Dir() << "\" } }\n";
  }
  auto sibling = LoadStreamTokenizer(params, (repo / "tensorrt_llm").string());
  std::filesystem::remove_all(repo);
  ASSERT_TRUE(sibling.ok()) << sibling.status().ToString();
  ASSERT_NE(*sibling, nullptr);
  EXPECT_EQ((*sibling)->vocab_size(), 50257);

  params.tokenizer_dir = tokenizer::testing::Gpt2Dir();
  auto own = LoadStreamTokenizer(params, "/nonexistent/repo/tensorrt_llm");
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  ASSERT_NE(*own, nullptr);
  EXPECT_EQ((*own)->vocab_size(), 50257);
  params.tokenizer_dir = "/nonexistent/tokenizer";
  auto bad = LoadStreamTokenizer(params, "/nonexistent/repo/tensorrt_llm");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("/nonexistent/tokenizer"));
}

}  // namespace
}  // namespace inflight::backend
