// The preprocessing / postprocessing work on host tensors, with GPT-2's tokenizer.
#include "tokenizer/text_models.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "unit/tokenizer/test_data.h"

namespace inflight::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Type = HostTensor::Type;

constexpr int32_t kEos = 50256;  // <|endoftext|>; GPT-2 has no pad token, so pad falls back to it

HostTensor Strings(std::string name, std::vector<int64_t> shape, std::vector<std::string> v) {
  HostTensor t;
  t.name = std::move(name);
  t.type = Type::kString;
  t.shape = std::move(shape);
  t.str = std::move(v);
  return t;
}
HostTensor Ints(std::string name, std::vector<int64_t> shape, std::vector<int32_t> v) {
  HostTensor t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.i32 = std::move(v);
  return t;
}
HostTensor Floats(std::string name, std::vector<int64_t> shape, std::vector<float> v) {
  HostTensor t;
  t.name = std::move(name);
  t.type = Type::kFp32;
  t.shape = std::move(shape);
  t.f32 = std::move(v);
  return t;
}

const HostTensor& Find(const std::vector<HostTensor>& ts, const std::string& name) {
  for (const HostTensor& t : ts)
    if (t.name == name) return t;
  ADD_FAILURE() << "no output " << name;
  static const HostTensor kEmpty;
  return kEmpty;
}

class TextModelsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = Tokenizer::Load(testing::Gpt2Dir());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tokenizer_ = std::move(t).value().release();
  }
  static void TearDownTestSuite() { delete tokenizer_; }
  static Tokenizer* tokenizer_;
};
Tokenizer* TextModelsTest::tokenizer_ = nullptr;

TEST_F(TextModelsTest, PreprocessBatchOfTwoWithDefaults) {
  const std::vector<HostTensor> inputs = {
      Strings("QUERY", {2, 1}, {"Hello world", "Born in north-east France, Soyer trained as a"}),
      Ints("REQUEST_OUTPUT_LEN", {2, 1}, {8, 16})};
  auto out = Preprocess(*tokenizer_, {}, inputs, PreprocessOutputNames());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), PreprocessOutputNames().size());
  const HostTensor& ids = Find(*out, "INPUT_ID");
  EXPECT_THAT(ids.shape, ElementsAre(2, 12));
  EXPECT_THAT(std::vector<int32_t>(ids.i32.begin(), ids.i32.begin() + 12),
              ElementsAre(15496, 995, kEos, kEos, kEos, kEos, kEos, kEos, kEos, kEos, kEos, kEos));
  EXPECT_THAT(std::vector<int32_t>(ids.i32.begin() + 12, ids.i32.end()),
              ElementsAre(28524, 287, 5093, 12, 23316, 4881, 11, 30022, 263, 8776, 355, 257));
  EXPECT_THAT(Find(*out, "REQUEST_INPUT_LEN").i32, ElementsAre(2, 12));
  EXPECT_THAT(Find(*out, "REQUEST_INPUT_LEN").shape, ElementsAre(2, 1));
  EXPECT_THAT(Find(*out, "REQUEST_OUTPUT_LEN").i32, ElementsAre(8, 16));
  EXPECT_THAT(Find(*out, "BAD_WORDS_IDS").shape, ElementsAre(2, 2, 0));
  EXPECT_THAT(Find(*out, "STOP_WORDS_IDS").shape, ElementsAre(2, 2, 0));
  EXPECT_THAT(Find(*out, "EMBEDDING_BIAS").shape, ElementsAre(2, 0));
  EXPECT_THAT(Find(*out, "OUT_END_ID").i32, ElementsAre(kEos, kEos));
  EXPECT_THAT(Find(*out, "OUT_PAD_ID").i32, ElementsAre(kEos, kEos));
  EXPECT_THAT(Find(*out, "DECODER_INPUT_ID").i32, ElementsAre(kEos, kEos));
  EXPECT_THAT(Find(*out, "REQUEST_DECODER_INPUT_LEN").i32, ElementsAre(1, 1));
}

TEST_F(TextModelsTest, PreprocessWordsIdsAndBias) {
  const std::vector<HostTensor> inputs = {
      Strings("QUERY", {2, 1}, {"a", "b"}),
      Ints("REQUEST_OUTPUT_LEN", {2, 1}, {1, 1}),
      Ints("END_ID", {2, 1}, {7, 8}),
      Ints("PAD_ID", {2, 1}, {0, 1}),
      Strings("BAD_WORDS_DICT", {2, 1}, {"Hello, world", ""}),
      Strings("STOP_WORDS_DICT", {2, 2}, {"Hello", " world,\"Hello, world\"", "", ""}),
      Strings("EMBEDDING_BIAS_WORDS", {2, 2}, {" world", "Hello", "Hello", " world"}),
      Floats("EMBEDDING_BIAS_WEIGHTS", {2, 2}, {2.0f, -1.0f, 0.5f, 0.25f})};
  auto out =
      Preprocess(*tokenizer_, {}, inputs,
                 {"OUT_END_ID", "OUT_PAD_ID", "BAD_WORDS_IDS", "STOP_WORDS_IDS", "EMBEDDING_BIAS"});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 5u);
  EXPECT_EQ((*out)[0].name, "OUT_END_ID");  // requested order
  EXPECT_THAT(Find(*out, "OUT_END_ID").i32, ElementsAre(7, 8));
  EXPECT_THAT(Find(*out, "OUT_PAD_ID").i32, ElementsAre(0, 1));
  const HostTensor& bad = Find(*out, "BAD_WORDS_IDS");
  EXPECT_THAT(bad.shape, ElementsAre(2, 2, 2));
  EXPECT_THAT(bad.i32, ElementsAre(15496, 995, 1, 2,  // "Hello", " world"
                                   0, 0, -1, -1));    // no words
  // Row 0: "Hello" | " world"; "Hello, world" quoted is one word of three tokens.
  const HostTensor& stop = Find(*out, "STOP_WORDS_IDS");
  EXPECT_THAT(stop.shape, ElementsAre(2, 2, 5));
  EXPECT_THAT(stop.i32, ElementsAre(15496, 995, 15496, 11, 995, 1, 2, 5, -1, -1,  // row 0
                                    0, 0, 0, 0, 0, -1, -1, -1, -1, -1));          // row 1
  const HostTensor& bias = Find(*out, "EMBEDDING_BIAS");
  ASSERT_THAT(bias.shape, ElementsAre(2, 50257));
  EXPECT_EQ(bias.f32[995], 2.0f);
  EXPECT_EQ(bias.f32[15496], -1.0f);
  EXPECT_EQ(bias.f32[50257 + 15496], 0.5f);
  EXPECT_EQ(bias.f32[50257 + 995], 0.25f);
  float total = 0;
  for (float v : bias.f32) total += v;
  EXPECT_FLOAT_EQ(total, 1.75f);  // nothing else was touched
}

TEST_F(TextModelsTest, PreprocessUnbatchedHasNoBatchDimension) {
  PreprocessOptions options;
  options.batched = false;
  auto out =
      Preprocess(*tokenizer_, options,
                 {Strings("QUERY", {1}, {"Hello world"}), Ints("REQUEST_OUTPUT_LEN", {1}, {4})},
                 {"INPUT_ID", "REQUEST_INPUT_LEN", "BAD_WORDS_IDS"});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_THAT(Find(*out, "INPUT_ID").shape, ElementsAre(2));
  EXPECT_THAT(Find(*out, "INPUT_ID").i32, ElementsAre(15496, 995));
  EXPECT_THAT(Find(*out, "REQUEST_INPUT_LEN").shape, ElementsAre(1));
  EXPECT_THAT(Find(*out, "BAD_WORDS_IDS").shape, ElementsAre(2, 0));
}

TEST_F(TextModelsTest, PreprocessErrorsNameTensorValueAndAccepted) {
  const HostTensor query = Strings("QUERY", {1, 1}, {"hi"});
  const HostTensor len = Ints("REQUEST_OUTPUT_LEN", {1, 1}, {4});
  struct Case {
    std::vector<HostTensor> inputs;
    std::vector<std::string> requested;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {{len}, {"INPUT_ID"}, {"QUERY", "required"}},
      {{query}, {"INPUT_ID"}, {"REQUEST_OUTPUT_LEN", "required"}},
      {{Ints("QUERY", {1, 1}, {3}), len}, {"INPUT_ID"}, {"QUERY", "INT32", "expected BYTES"}},
      {{Strings("QUERY", {1, 1}, {"bad \xC3("}), len},
       {"INPUT_ID"},
       {"QUERY row 0", "UTF-8", "offset 4"}},
      {{query, Ints("REQUEST_OUTPUT_LEN", {2, 1}, {4, 4})},
       {"INPUT_ID"},
       {"REQUEST_OUTPUT_LEN", "[2, 1]", "batch size 1"}},
      {{query, len, Strings("EMBEDDING_BIAS_WORDS", {1, 1}, {"x"})},
       {"EMBEDDING_BIAS"},
       {"EMBEDDING_BIAS_WORDS is given without EMBEDDING_BIAS_WEIGHTS"}},
      {{query, len, Strings("EMBEDDING_BIAS_WORDS", {1, 2}, {"x", "y"}),
        Floats("EMBEDDING_BIAS_WEIGHTS", {1, 1}, {1.0f})},
       {"EMBEDDING_BIAS"},
       {"2 words but 1 weights"}},
      {{query, len, Floats("END_ID", {1, 1}, {1.0f})},
       {"OUT_END_ID"},
       {"END_ID", "FP32", "expected INT32"}},
      {{query, len}, {"NOT_AN_OUTPUT"}, {"NOT_AN_OUTPUT", "INPUT_ID"}},
  };
  for (const Case& c : cases) {
    auto out = Preprocess(*tokenizer_, {}, c.inputs, c.requested);
    ASSERT_FALSE(out.ok()) << c.expected[0];
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    for (const std::string& s : c.expected) EXPECT_THAT(out.status().message(), HasSubstr(s));
  }
}

TEST_F(TextModelsTest, PostprocessBeamsLengthsAndPadding) {
  const std::vector<HostTensor> inputs = {
      Ints("TOKENS_BATCH", {2, 2, 4},
           {15496, 995, kEos, -1, 15496, -1, 995, -1,    // row 0: two beams
            28524, 287, 5093, 12, 28524, 287, -1, -1}),  // row 1
      Ints("SEQUENCE_LENGTH", {2, 2}, {3, 4, 2, 4})};
  auto out = Postprocess(*tokenizer_, {}, inputs, {"OUTPUT"});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const HostTensor& text = Find(*out, "OUTPUT");
  EXPECT_THAT(text.shape, ElementsAre(2, 2));
  EXPECT_THAT(text.str, ElementsAre("Hello world", "Hello world", "Born in", "Born in"));
  PostprocessOptions keep;
  keep.skip_special_tokens = false;
  auto kept = Postprocess(*tokenizer_, keep, inputs, {"OUTPUT"});
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(Find(*kept, "OUTPUT").str[0], "Hello world<|endoftext|>");
}

TEST_F(TextModelsTest, PostprocessErrors) {
  auto bad_id =
      Postprocess(*tokenizer_, {}, {Ints("TOKENS_BATCH", {1, 1, 2}, {15496, 60000})}, {"OUTPUT"});
  ASSERT_FALSE(bad_id.ok());
  EXPECT_THAT(bad_id.status().message(), HasSubstr("TOKENS_BATCH[0][0]"));
  EXPECT_THAT(bad_id.status().message(), HasSubstr("60000"));
  EXPECT_THAT(bad_id.status().message(), HasSubstr("50257"));
  auto long_len = Postprocess(
      *tokenizer_, {},
      {Ints("TOKENS_BATCH", {1, 1, 2}, {1, 2}), Ints("SEQUENCE_LENGTH", {1, 1}, {3})}, {"OUTPUT"});
  ASSERT_FALSE(long_len.ok());
  EXPECT_THAT(long_len.status().message(), HasSubstr("SEQUENCE_LENGTH[0][0] is 3"));
  auto rank = Postprocess(*tokenizer_, {}, {Ints("TOKENS_BATCH", {1, 2}, {1, 2})}, {"OUTPUT"});
  ASSERT_FALSE(rank.ok());
  EXPECT_THAT(rank.status().message(), HasSubstr("[batch, beams, length]"));
}

}  // namespace
}  // namespace inflight::tokenizer
