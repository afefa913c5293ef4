// Unfilled template placeholders: found in the text (not in comments), and reported by the config
// loader with their lines and the fill_template.py keys that set them.
#include "config/placeholders.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "config/model_config_loader.h"
#include "unit/config/test_files.h"

namespace inflight::config {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class TempConfig {
 public:
  explicit TempConfig(const std::string& text) {
    dir_ =
        fs::temp_directory_path() /
        ("placeholders_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = (dir_ / "config.pbtxt").string();
    std::ofstream(path_) << text;
  }
  ~TempConfig() { fs::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  fs::path dir_;
  std::string path_;
};

TEST(PlaceholdersTest, FindsKeysWithLinesAndWhetherQuoted) {
  const auto uses = FindPlaceholders(
      "max_batch_size: ${triton_max_batch_size}\n"
      "# a comment naming ${not_this}\n"
      "backend: \"${triton_backend}\"  # and ${nor_this}\n"
      "x: \"quote \\\" then ${in_string}\" y: ${after_string}\n"
      "z: ${not a key} w: $plain ${ok_1}\n");
  ASSERT_EQ(uses.size(), 5u);
  EXPECT_EQ(uses[0].key, "triton_max_batch_size");
  EXPECT_EQ(uses[0].line, 1);
  EXPECT_FALSE(uses[0].in_string);
  EXPECT_EQ(uses[1].key, "triton_backend");
  EXPECT_EQ(uses[1].line, 3);
  EXPECT_TRUE(uses[1].in_string);
  EXPECT_EQ(uses[2].key, "in_string");
  EXPECT_TRUE(uses[2].in_string);
  EXPECT_EQ(uses[3].key, "after_string");
  EXPECT_FALSE(uses[3].in_string);
  EXPECT_EQ(uses[4].key, "ok_1");
  EXPECT_EQ(uses[4].line, 5);
}

// The ensemble as seed 000 fills it with NVIDIA's script (triton_max_batch_size only): the
// protobuf error alone would be "Expected integer or identifier, got: $".
TEST(PlaceholdersTest, LoaderNamesEachUnfilledKeyAndTheCommandThatSetsIt) {
  std::string text = testing::ReadFile(testing::SourceDir() / "all_models" /
                                       "inflight_batcher_llm" / "ensemble" / "config.pbtxt");
  text = std::regex_replace(text, std::regex(R"(\$\{triton_max_batch_size\})"), "4");
  TempConfig file(text);
  auto config = LoadModelConfigFile(file.path());
  ASSERT_FALSE(config.ok());
  const std::string& m = config.status().message();
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(m, HasSubstr(file.path() + ": unfilled template placeholders"));
  EXPECT_THAT(m, HasSubstr("${logits_datatype} (lines "));
  EXPECT_THAT(m, HasSubstr("${prompt_embedding_table_data_type} (line"));
  // Keys in the order they first appear.
  EXPECT_THAT(m, HasSubstr("fill_template.py -i " + file.path() +
                           " prompt_embedding_table_data_type:<TYPE_FP16|TYPE_BF16|TYPE_FP32>,"
                           "logits_datatype:<TYPE_FP32|TYPE_FP16>"));
  EXPECT_THAT(m,
              HasSubstr("prompt_embedding_table_data_type TYPE_FP16, logits_datatype TYPE_FP32"));
  EXPECT_THAT(m, HasSubstr("Expected integer or identifier"));  // protobuf's own words, last
  EXPECT_THAT(m, Not(HasSubstr("triton_max_batch_size")));
}

TEST(PlaceholdersTest, EveryLineOfARepeatedKeyIsListed) {
  TempConfig file(
      "name: \"m\"\nmax_batch_size: ${triton_max_batch_size}\n"
      "dynamic_batching { preferred_batch_size: [ ${triton_max_batch_size} ] }\n"
      "instance_group [ { count: ${bls_instance_count} } ]\n");
  auto config = LoadModelConfigFile(file.path());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("${triton_max_batch_size} (lines 2, 3), ${bls_instance_count} (line 4)"));
  EXPECT_THAT(config.status().message(),
              HasSubstr(" triton_max_batch_size:<integer>,bls_instance_count:<integer>"));
  EXPECT_THAT(config.status().message(), Not(HasSubstr("writes these defaults")));
}

TEST(PlaceholdersTest, QuotedPlaceholderInAFieldIsAnError) {
  TempConfig file("name: \"m\"\nbackend: \"${triton_backend}\"\nmax_batch_size: 4\n");
  auto config = LoadModelConfigFile(file.path());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("backend is the unfilled template placeholder \"${triton_backend}\"; set "
                        "it with fill_template.py -i " +
                        file.path() + " triton_backend:inflight"));
}

TEST(PlaceholdersTest, UnfilledParametersStillMeanUnset) {
  TempConfig file(
      "name: \"m\"\nbackend: \"inflight\"\n# backend: \"${triton_backend}\" in a comment\n"
      "parameters: { key: \"batch_scheduler_policy\" value: { string_value: "
      "\"${batch_scheduler_policy}\" } }\n");
  auto config = LoadModelConfigFile(file.path());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->parameters().at("batch_scheduler_policy").string_value(),
            "${batch_scheduler_policy}");
}

TEST(PlaceholdersTest, OtherParseErrorsKeepProtobufsMessage) {
  TempConfig file("name: \"m\"\nmax_batch_size: four\n");
  auto config = LoadModelConfigFile(file.path());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr(file.path() + ": failed to parse"));
  EXPECT_THAT(config.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(config.status().message(), Not(HasSubstr("unfilled")));
}

}  // namespace
}  // namespace inflight::config
