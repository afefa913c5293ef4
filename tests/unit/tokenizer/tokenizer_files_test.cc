// Loading from small hand-written tokenizer folders: the tokenizer.json features GPT-2 does not
// use (Sequence pre-tokenizer, TemplateProcessing, merges as pairs, added tokens) and the error
// messages for bad files.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/json_file.h"
#include "tokenizer/regex_splitter.h"
#include "tokenizer/tokenizer.h"

namespace inflight::tokenizer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TokenizerFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("inflight_tok_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }

  // Byte-level vocabulary: ids 0..255 are the single bytes, then "Hi" (256) and "Ġt" (257);
  // added tokens <s> (258), </s> (259), and a non-special <sep> (260).
  static json SmallTokenizerJson() {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[ByteLevelEncode(std::string(1, static_cast<char>(b)))] = b;
    vocab["Hi"] = 256;
    vocab[ByteLevelEncode(" ") + "t"] = 257;
    json added = json::array();
    int id = 258;
    for (auto [content, special] : {std::pair{"<s>", true}, {"</s>", true}, {"<sep>", false}}) {
      added.push_back({{"id", id++},
                       {"content", content},
                       {"special", special},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"single_word", false}});
    }
    return {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", nullptr},
            {"pre_tokenizer",
             {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Split"},
                 {"pattern", {{"Regex", std::string(kGpt2SplitPattern)}}},
                 {"behavior", "Isolated"},
                 {"invert", false}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
            {"post_processor",
             {{"type", "TemplateProcessing"},
              {"single",
               {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
              {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {258}}, {"tokens", {"<s>"}}}}}}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model",
             {{"type", "BPE"},
              {"vocab", vocab},
              {"merges",
               json::array({json::array({"H", "i"}), json::array({ByteLevelEncode(" "), "t"})})},
              {"ignore_merges", false}}}};
  }

  Result<std::unique_ptr<Tokenizer>> Load() { return Tokenizer::Load(dir_.string()); }

  fs::path dir_;
};

TEST_F(TokenizerFilesTest, TemplateAddsBosAndSpecialsSplitOut) {
  Write("tokenizer.json", SmallTokenizerJson().dump());
  auto t = Load();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->vocab_size(), 261);
  EXPECT_THAT(*(*t)->Encode("Hi t", true), ElementsAre(258, 256, 257));
  EXPECT_THAT(*(*t)->Encode("Hi t", false), ElementsAre(256, 257));
  EXPECT_THAT(*(*t)->Encode("Hi<sep></s>", false), ElementsAre(256, 260, 259));
  const std::vector<int32_t> ids = {258, 256, 260, 257, 259};
  EXPECT_EQ(*(*t)->Decode(ids, /*skip_special_tokens=*/false), "<s>Hi<sep> t</s>");
  // <sep> is added but not special: it stays.
  EXPECT_EQ(*(*t)->Decode(ids, /*skip_special_tokens=*/true), "Hi<sep> t");
  // No tokenizer_config.json: nothing names the end token.
  EXPECT_EQ((*t)->eos_id(), std::nullopt);
}

TEST_F(TokenizerFilesTest, MergesAsStringsEqualMergesAsPairs) {
  json j = SmallTokenizerJson();
  j["model"]["merges"] = json::array({"H i", ByteLevelEncode(" ") + " t"});
  Write("tokenizer.json", j.dump());
  auto t = Load();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_THAT(*(*t)->Encode("Hi t", false), ElementsAre(256, 257));
}

TEST_F(TokenizerFilesTest, ConfigNamesSpecialsAndOverridesBos) {
  Write("tokenizer.json", SmallTokenizerJson().dump());
  Write("tokenizer_config.json",
        json({{"bos_token", "<s>"},
              {"eos_token", {{"__type", "AddedToken"}, {"content", "</s>"}}},
              {"pad_token", nullptr},
              {"add_bos_token", false},
              {"add_eos_token", true}})
            .dump());
  auto t = Load();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->bos_id(), 258);
  EXPECT_EQ((*t)->eos_id(), 259);
  EXPECT_EQ((*t)->pad_id(), std::nullopt);
  EXPECT_THAT(*(*t)->Encode("Hi", true), ElementsAre(256, 259));
}

TEST_F(TokenizerFilesTest, MissingDirectoryAndMissingFiles) {
  auto missing = Tokenizer::Load((dir_ / "nope").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope"));
  auto empty = Load();
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("tokenizer.json"));
  EXPECT_THAT(empty.status().message(), HasSubstr("vocab.json + merges.txt"));
}

TEST_F(TokenizerFilesTest, ErrorsNameTheFileAndTheProblem) {
  const std::string path = (dir_ / "tokenizer.json").string();
  struct Case {
    std::string name;
    std::function<void(json&)> edit;
    std::vector<std::string> expected;  // substrings of the message
  };
  const std::vector<Case> cases = {
      {"wordpiece",
       [](json& j) { j["model"]["type"] = "WordPiece"; },
       {"model.type", "WordPiece", "BPE"}},
      {"merge not in vocab",
       [](json& j) {
         j["model"]["merges"].push_back(json::array({"x", "y"}));
       },
       {"merge 2", "\"xy\"", "not in the vocabulary"}},
      {"bad merge string",
       [](json& j) { j["model"]["merges"] = json::array({"Hi"}); },
       {"model.merges[0]", "\"Hi\""}},
      {"bad regex",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(open"; },
       {"pre_tokenizer.pretokenizers[0].pattern", "(open"}},
      {"bad behavior",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; },
       {"behavior", "Sideways", "Isolated"}},
      {"metaspace",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}};
       },
       {"pre_tokenizer.type", "Metaspace"}},
      {"no byte level", [](json& j) { j["pre_tokenizer"] = nullptr; }, {"ByteLevel"}},
      {"bad id",
       [](json& j) { j["model"]["vocab"]["Hi"] = "256"; },
       {"model.vocab[\"Hi\"]", "\"256\""}},
      {"template without ids",
       [](json& j) { j["post_processor"]["special_tokens"] = json::object(); },
       {"post_processor.special_tokens", "<s>"}},
  };
  for (const Case& c : cases) {
    json j = SmallTokenizerJson();
    c.edit(j);
    Write("tokenizer.json", j.dump());
    auto t = Load();
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_THAT(t.status().message(), HasSubstr(path)) << c.name;
    for (const std::string& s : c.expected)
      EXPECT_THAT(t.status().message(), HasSubstr(s)) << c.name;
  }
}

TEST_F(TokenizerFilesTest, NotJsonNamesFileAndPosition) {
  Write("tokenizer.json", "{\"model\": [1, 2,,]}");
  auto t = Load();
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr((dir_ / "tokenizer.json").string()));
  EXPECT_THAT(t.status().message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(t.status().message(), HasSubstr("column"));
}

// Found by fuzz_infer_json in the HTTP decoder, and the same here: nlohmann throws out_of_range
// (not parse_error) for a number whose exponent overflows; ReadJsonFile let it escape.
TEST_F(TokenizerFilesTest, NumberOverflowIsNotJsonWithThePath) {
  Write("tokenizer.json", "{\"model\": {\"dropout\": 1e854775807}}");
  auto result = ReadJsonFile((dir_ / "tokenizer.json").string());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("tokenizer.json: not valid JSON"));
  EXPECT_THAT(result.status().message(), HasSubstr("number overflow"));
}

// Found with fuzz_tokenizer_json: ids were narrowed to int32 unchecked. An added token at
// 2147483647 overflowed `id + 1` (UBSan), one at 2^32 + 258 was read as 258, a vocabulary id of
// 300,000,000 allocated a 2.4 GB id table, and a post-processor id outside the vocabulary came
// out of Encode.
TEST_F(TokenizerFilesTest, TokenIdsOutsideTheAcceptedRangeAreRefused) {
  json added_max = SmallTokenizerJson();
  added_max["added_tokens"][0]["id"] = 2147483647;
  json added_wrapped = SmallTokenizerJson();
  added_wrapped["added_tokens"][0]["id"] = 4294967296LL + 258;
  json vocab_big = SmallTokenizerJson();
  vocab_big["model"]["vocab"]["zz"] = 300000000;
  json template_big = SmallTokenizerJson();
  template_big["post_processor"]["special_tokens"]["<s>"]["ids"] = {16777216};
  const std::pair<json, std::string> cases[] = {
      {added_max, "added_tokens[0].id is missing or not an integer id in 0..16777215"},
      {added_wrapped, "added_tokens[0].id is missing or not an integer id in 0..16777215"},
      {vocab_big, "model.vocab[\"zz\"] is 300000000; expected an integer id in 0..16777215"},
      {template_big, "special_tokens[\"<s>\"].ids holds 16777216"},
  };
  for (const auto& [file, expected] : cases) {
    Write("tokenizer.json", file.dump());
    auto t = Load();
    ASSERT_FALSE(t.ok()) << expected;
    EXPECT_THAT(t.status().message(), HasSubstr(expected));
  }
}

TEST_F(TokenizerFilesTest, PostProcessorIdMustNameAToken) {
  json j = SmallTokenizerJson();
  j["post_processor"]["special_tokens"]["<s>"]["ids"] = {9999};
  Write("tokenizer.json", j.dump());
  auto t = Load();
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              HasSubstr("the post-processor adds token id 9999, which names no token of the "
                        "vocabulary (261 ids)"));
}

TEST_F(TokenizerFilesTest, ConfigAddedTokenIdOutsideTheRangeIsRefused) {
  Write("tokenizer.json", SmallTokenizerJson().dump());
  Write("tokenizer_config.json",
        json({{"added_tokens_decoder", {{"2147483647", {{"content", "<x>"}}}}}}).dump());
  auto t = Load();
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              HasSubstr("added_tokens_decoder key \"2147483647\" is not an integer id"));
}

TEST_F(TokenizerFilesTest, ConfigEosNotInVocabulary) {
  Write("tokenizer.json", SmallTokenizerJson().dump());
  Write("tokenizer_config.json", json({{"eos_token", "<|missing|>"}}).dump());
  auto t = Load();
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("tokenizer_config.json"));
  EXPECT_THAT(t.status().message(), HasSubstr("eos_token \"<|missing|>\""));
}

TEST_F(TokenizerFilesTest, Gpt2FilesBadMergeLine) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelEncode(std::string(1, static_cast<char>(b)))] = b;
  vocab["Hi"] = 256;
  Write("vocab.json", vocab.dump());
  Write("merges.txt", "#version: 0.2\nH i\nthree part line\n");
  auto t = Load();
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("merges.txt line 3"));
  EXPECT_THAT(t.status().message(), HasSubstr("three part line"));

  Write("merges.txt", "#version: 0.2\nH i\n");
  auto ok = Load();
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_THAT(*(*ok)->Encode("Hi", true), ElementsAre(256));
}

}  // namespace
}  // namespace inflight::tokenizer
