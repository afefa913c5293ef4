#include "config/model_config_loader.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace inflight::config {
namespace {

using google::protobuf::util::MessageDifferencer;

constexpr const char* kConfig = R"pb(
  name: "tensorrt_llm"
  backend: "inflight"
  max_batch_size: 8
  model_transaction_policy { decoupled: true }
  dynamic_batching {
    preferred_batch_size: [ 8 ]
    max_queue_delay_microseconds: 1500
    default_queue_policy { max_queue_size: 32 }
  } input
  [ {
    name: "input_ids"
    data_type: TYPE_INT32
    dims: [ -1 ]
    allow_ragged_batch: true
  }
    , {
      name: "input_lengths"
      data_type: TYPE_INT32
      dims: [ 1 ]
      reshape: { shape: [] }
    }] output
  [ {
    name: "output_ids"
    data_type: TYPE_INT32
    dims: [ -1, -1 ]
  }] instance_group
  [ { count: 1 kind: KIND_CPU }]
  parameters: {
    key: "gpt_model_type"
    value: { string_value: "inflight_fused_batching" }
  }
)pb";

TEST(ModelConfigLoaderTest, ParsesTextFormat) {
  auto config = ParseModelConfigText(kConfig);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->name(), "tensorrt_llm");
  EXPECT_EQ(config->max_batch_size(), 8);
  EXPECT_TRUE(config->model_transaction_policy().decoupled());
  EXPECT_EQ(config->dynamic_batching().max_queue_delay_microseconds(), 1500u);
  EXPECT_EQ(config->dynamic_batching().default_queue_policy().max_queue_size(), 32u);
  ASSERT_EQ(config->input_size(), 2);
  EXPECT_EQ(config->input(0).dims(0), -1);
  EXPECT_TRUE(config->input(0).allow_ragged_batch());
  EXPECT_TRUE(config->input(1).has_reshape());
  EXPECT_EQ(config->input(1).reshape().shape_size(), 0);
  EXPECT_EQ(config->instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(config->parameters().at("gpt_model_type").string_value(), "inflight_fused_batching");
}

TEST(ModelConfigLoaderTest, TextErrorsCarryLineAndColumn) {
  auto config = ParseModelConfigText("name: \"m\"\nmax_batch_size: 4\n  bogus_field: 1\n");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("line 3, column 14"), std::string::npos)
      << config.status().message();
  EXPECT_NE(config.status().message().find("bogus_field"), std::string::npos);

  auto unfilled = ParseModelConfigText("name: \"m\"\nmax_batch_size: ${triton_max_batch_size}\n");
  ASSERT_FALSE(unfilled.ok());
  EXPECT_NE(unfilled.status().message().find("line 2, column 17"), std::string::npos)
      << unfilled.status().message();
}

TEST(ModelConfigLoaderTest, TextAcceptsPythonStyleBooleans) {
  // fill_template.py users write decoupled_mode:False, as NVIDIA's README does.
  auto config = ParseModelConfigText("model_transaction_policy { decoupled: False }");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FALSE(config->model_transaction_policy().decoupled());
  config = ParseModelConfigText("model_transaction_policy { decoupled: True }");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->model_transaction_policy().decoupled());
}

TEST(ModelConfigLoaderTest, JsonRoundTripGivesEqualMessage) {
  auto text = ParseModelConfigText(kConfig);
  ASSERT_TRUE(text.ok());
  auto json = ModelConfigToJson(*text);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  auto back = ParseModelConfigJson(*json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(*text, *back)) << diff;
}

// Found by fuzz_model_config_text: bytes that are not UTF-8 in a string (config.pbtxt is read as
// bytes; here an overlong C1 BE), which protobuf's JSON printer passes through, made the JSON a
// backend is handed fail to parse ("protobuf printed JSON that does not parse").
TEST(ModelConfigLoaderTest, StringsThatAreNotUtf8PrintAsReplacementCharacters) {
  auto config = ParseModelConfigText(
      "name: \"m\xc1\xbe\"\nparameters { key: \"k\xc1\xbe\" value { string_value: \"v\" } }");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto printed = ModelConfigToJson(*config);
  ASSERT_TRUE(printed.ok()) << printed.status().ToString();
  const std::string replaced = "\xef\xbf\xbd\xef\xbf\xbd";  // U+FFFD for each byte
  auto json = nlohmann::json::parse(*printed);
  EXPECT_EQ(json["name"], "m" + replaced);
  EXPECT_EQ(json["parameters"]["k" + replaced]["string_value"], "v");
  auto again = ParseModelConfigJson(*printed);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->name(), "m" + replaced);
}

TEST(ModelConfigLoaderTest, JsonLooksLikeWhatTritonHandsABackend) {
  auto config = ParseModelConfigText(kConfig);
  ASSERT_TRUE(config.ok());
  auto printed = ModelConfigToJson(*config);
  ASSERT_TRUE(printed.ok());
  auto json = nlohmann::json::parse(*printed);
  // int64 fields are numbers, not strings as protobuf prints them.
  EXPECT_TRUE(json["input"][0]["dims"][0].is_number_integer()) << *printed;
  EXPECT_EQ(json["input"][0]["dims"][0].get<int64_t>(), -1);
  EXPECT_TRUE(json["dynamic_batching"]["max_queue_delay_microseconds"].is_number_integer());
  EXPECT_EQ(json["dynamic_batching"]["max_queue_delay_microseconds"].get<uint64_t>(), 1500u);
  // Proto field names, enums by name, primitives always printed.
  EXPECT_EQ(json["input"][0]["data_type"], "TYPE_INT32");
  EXPECT_EQ(json["instance_group"][0]["kind"], "KIND_CPU");
  EXPECT_EQ(json["model_transaction_policy"]["decoupled"], true);
  EXPECT_EQ(json["platform"], "");
  EXPECT_EQ(json["input"][0]["optional"], false);
  EXPECT_EQ(json["parameters"]["gpt_model_type"]["string_value"], "inflight_fused_batching");
}

TEST(ModelConfigLoaderTest, JsonAcceptsInt64AsNumbersOrStringsAndIgnoresUnknownFields) {
  const char* json = R"({
    "name": "m", "max_batch_size": 4, "some_future_field": {"x": 1},
    "input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [-1, "3"]}],
    "dynamic_batching": {"max_queue_delay_microseconds": "100",
                         "default_queue_policy": {"max_queue_size": 7}}
  })";
  auto config = ParseModelConfigJson(json);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->input(0).dims_size(), 2);
  EXPECT_EQ(config->input(0).dims(0), -1);
  EXPECT_EQ(config->input(0).dims(1), 3);
  EXPECT_EQ(config->input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(config->dynamic_batching().max_queue_delay_microseconds(), 100u);
  EXPECT_EQ(config->dynamic_batching().default_queue_policy().max_queue_size(), 7u);
}

TEST(ModelConfigLoaderTest, JsonErrorsAreInvalidArgument) {
  auto config = ParseModelConfigJson(R"({"max_batch_size": "four"})");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("max_batch_size"), std::string::npos)
      << config.status().message();
  EXPECT_FALSE(ParseModelConfigJson("{").ok());
  EXPECT_FALSE(ParseModelConfigJson(R"({"input": [{"dims": [1.5]}]})").ok());
  // Unknown enum names are dropped like unknown fields (a newer core may know more types).
  auto unknown_enum = ParseModelConfigJson(R"({"input": [{"data_type": "TYPE_NOPE"}]})");
  ASSERT_TRUE(unknown_enum.ok()) << unknown_enum.status().ToString();
  EXPECT_EQ(unknown_enum->input(0).data_type(), inference::TYPE_INVALID);
}

TEST(ModelConfigLoaderTest, LoadFileNamesThePath) {
  auto missing = LoadModelConfigFile("/nonexistent/dir/config.pbtxt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/config.pbtxt"), std::string::npos);

  auto path = std::filesystem::temp_directory_path() / "inflight_config_loader_test.pbtxt";
  {
    std::ofstream f(path);
    f << "name: \"m\"\nmax_batch_size: oops\n";
  }
  auto bad = LoadModelConfigFile(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path.string() + ": "), std::string::npos);
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace inflight::config
