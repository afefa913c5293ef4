// Loading the tokenizer backend's models from the configuration JSON a Triton core hands over.
#include "tokenizer/backend/model_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "unit/tokenizer/test_data.h"

namespace inflight::tokenizer::backend {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json Config(const std::string& input, int max_batch_size, json parameters) {
  return {{"name", "m"},
          {"backend", "inflight_tokenizer"},
          {"max_batch_size", max_batch_size},
          {"input", {{{"name", input}, {"data_type", "TYPE_STRING"}, {"dims", {-1}}}}},
          {"parameters", std::move(parameters)}};
}

json Param(const std::string& value) {
  return {{"string_value", value}};
}

TEST(TextModelStateTest, PreprocessingWithDefaults) {
  auto state = CreateTextModelState(
      "preprocessing", Config("QUERY", 8, {{"tokenizer_dir", Param(testing::Gpt2Dir())}}).dump());
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ((*state)->role, TextModelRole::kPreprocessing);
  EXPECT_TRUE((*state)->batched);
  EXPECT_TRUE((*state)->add_special_tokens);
  EXPECT_EQ((*state)->tokenizer->vocab_size(), 50257);

  HostTensor query{"QUERY", HostTensor::Type::kString, {1, 1}, {}, {}, {"Hello world"}};
  HostTensor len{"REQUEST_OUTPUT_LEN", HostTensor::Type::kInt32, {1, 1}, {5}, {}, {}};
  auto out = (*state)->Run({query, len}, {});  // nothing named: every output
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->size(), 10u);
  EXPECT_EQ((*out)[0].name, "INPUT_ID");
  EXPECT_THAT((*out)[0].i32, ::testing::ElementsAre(15496, 995));
}

TEST(TextModelStateTest, PostprocessingFlagsAndNoBatching) {
  auto state =
      CreateTextModelState("postprocessing", Config("TOKENS_BATCH", 0,
                                                    {{"tokenizer_dir", Param(testing::Gpt2Dir())},
                                                     {"skip_special_tokens", Param("False")}})
                                                 .dump());
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ((*state)->role, TextModelRole::kPostprocessing);
  EXPECT_FALSE((*state)->batched);
  EXPECT_FALSE((*state)->skip_special_tokens);
  HostTensor tokens{"TOKENS_BATCH", HostTensor::Type::kInt32, {1, 2}, {15496, 50256}, {}, {}};
  auto out = (*state)->Run({tokens}, {"OUTPUT"});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_THAT((*out)[0].str, ::testing::ElementsAre("Hello<|endoftext|>"));
}

TEST(TextModelStateTest, LoadErrorsNameModelAndCause) {
  struct Case {
    json config;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {Config("QUERY", 1, {{"tokenizer_dir", Param("${tokenizer_dir}")}}),
       {"'pre'", "tokenizer_dir", "not set"}},
      {Config("QUERY", 1, json::object()), {"'pre'", "tokenizer_dir"}},
      {Config("QUERY", 1, {{"tokenizer_dir", Param("/nonexistent/tok")}}),
       {"'pre'", "/nonexistent/tok"}},
      {Config("INPUT_ID", 1, {{"tokenizer_dir", Param(testing::Gpt2Dir())}}),
       {"'pre'", "QUERY", "TOKENS_BATCH"}},
      {Config(
           "QUERY", 1,
           {{"tokenizer_dir", Param(testing::Gpt2Dir())}, {"add_special_tokens", Param("maybe")}}),
       {"'pre'", "add_special_tokens", "maybe"}},
  };
  for (const Case& c : cases) {
    auto state = CreateTextModelState("pre", c.config.dump());
    ASSERT_FALSE(state.ok()) << c.config.dump();
    for (const std::string& s : c.expected) EXPECT_THAT(state.status().message(), HasSubstr(s));
  }
}

}  // namespace
}  // namespace inflight::tokenizer::backend
