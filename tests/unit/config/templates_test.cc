// The repository templates (all_models/inflight_batcher_llm) keep NVIDIA's contract and parse
// once filled.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "config/llm_params.h"
#include "config/model_config_loader.h"
#include "unit/config/test_files.h"

namespace inflight::config {
namespace {

using testing::ReadFile;
using testing::SourceDir;

const char* const kModels[] = {"preprocessing", "tensorrt_llm", "postprocessing", "ensemble",
                               "tensorrt_llm_bls"};

std::string TemplateText(const std::string& model) {
  return ReadFile(SourceDir() / "all_models" / "inflight_batcher_llm" / model / "config.pbtxt");
}

// Every ${key} of a template, in the order they appear.
std::set<std::string> Placeholders(const std::string& text) {
  std::set<std::string> keys;
  std::regex placeholder(R"(\$\{([A-Za-z_][A-Za-z0-9_]*)\})");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), placeholder);
       it != std::sregex_iterator(); ++it) {
    keys.insert((*it)[1]);
  }
  return keys;
}

// Fills every placeholder: the values a user would give, "" for the rest (= use the default).
std::string FillAll(std::string text) {
  const std::map<std::string, std::string> values = {
      {"triton_backend", "inflight"},
      {"triton_max_batch_size", "64"},
      {"decoupled_mode", "true"},
      {"max_queue_delay_microseconds", "0"},
      {"max_queue_size", "0"},
      {"preprocessing_instance_count", "1"},
      {"postprocessing_instance_count", "1"},
      {"bls_instance_count", "1"},
      {"logits_datatype", "TYPE_FP32"},
      {"encoder_input_features_data_type", "TYPE_FP16"},
      {"prompt_embedding_table_data_type", "TYPE_FP16"},
      {"batching_strategy", "inflight_fused_batching"},
      {"engine_dir", "engines/gpt2"},
  };
  for (const std::string& key : Placeholders(text)) {
    auto it = values.find(key);
    const std::string value = it == values.end() ? "" : it->second;
    const std::string needle = "${" + key + "}";
    for (size_t pos = text.find(needle); pos != std::string::npos;
         pos = text.find(needle, pos + value.size())) {
      text.replace(pos, needle.size(), value);
    }
  }
  return text;
}

const inference::ModelInput* FindInput(const inference::ModelConfig& c, const std::string& name) {
  for (const auto& input : c.input()) {
    if (input.name() == name) return &input;
  }
  return nullptr;
}

TEST(TemplatesTest, UnfilledTemplatesNameTheFirstPlaceholderThatBlocksParsing) {
  auto config = ParseModelConfigText(TemplateText("tensorrt_llm"));
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("line "), std::string::npos);
}

TEST(TemplatesTest, EveryTemplateParsesOnceFilledAndRoundTripsThroughJson) {
  for (const char* model : kModels) {
    SCOPED_TRACE(model);
    auto config = ParseModelConfigText(FillAll(TemplateText(model)));
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->name(), model);
    EXPECT_EQ(config->max_batch_size(), 64);
    auto json = ModelConfigToJson(*config);
    ASSERT_TRUE(json.ok());
    auto back = ParseModelConfigJson(*json);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*config, *back));
  }
}

TEST(TemplatesTest, BackendsFollowOurDifferences) {
  std::map<std::string, inference::ModelConfig> configs;
  for (const char* model : kModels) {
    auto config = ParseModelConfigText(FillAll(TemplateText(model)));
    ASSERT_TRUE(config.ok()) << model << ": " << config.status().ToString();
    configs[model] = *config;
  }
  EXPECT_EQ(configs["tensorrt_llm"].backend(), "inflight");
  EXPECT_EQ(configs["preprocessing"].backend(), "inflight_tokenizer");
  EXPECT_EQ(configs["postprocessing"].backend(), "inflight_tokenizer");
  EXPECT_EQ(configs["tensorrt_llm_bls"].backend(), "inflight_bls");
  EXPECT_EQ(configs["ensemble"].platform(), "ensemble");
  // The tokenizer backend tells the roles apart by these inputs.
  EXPECT_NE(FindInput(configs["preprocessing"], "QUERY"), nullptr);
  EXPECT_EQ(FindInput(configs["preprocessing"], "TOKENS_BATCH"), nullptr);
  EXPECT_NE(FindInput(configs["postprocessing"], "TOKENS_BATCH"), nullptr);
  EXPECT_EQ(FindInput(configs["postprocessing"], "QUERY"), nullptr);
  EXPECT_TRUE(configs["tensorrt_llm"].model_transaction_policy().decoupled());
}

TEST(TemplatesTest, LlmInputsAreOptionalExceptLengths) {
  auto config = ParseModelConfigText(FillAll(TemplateText("tensorrt_llm")));
  ASSERT_TRUE(config.ok());
  for (const auto& input : config->input()) {
    const bool required = input.name() == "input_lengths" || input.name() == "request_output_len";
    EXPECT_EQ(input.optional(), !required) << input.name();
  }
  const auto* ids = FindInput(*config, "input_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->data_type(), inference::TYPE_INT32);
  EXPECT_TRUE(ids->allow_ragged_batch());
  const auto* stop_words = FindInput(*config, "stop_words_list");
  ASSERT_NE(stop_words, nullptr);
  ASSERT_EQ(stop_words->dims_size(), 2);
  EXPECT_EQ(stop_words->dims(0), 2);
  EXPECT_EQ(stop_words->dims(1), -1);
  EXPECT_EQ(FindInput(*config, "seed")->data_type(), inference::TYPE_UINT64);
  EXPECT_TRUE(FindInput(*config, "temperature")->has_reshape());
}

TEST(TemplatesTest, LlmTemplateKeysMatchTheParameterTable) {
  auto config = ParseModelConfigText(FillAll(TemplateText("tensorrt_llm")));
  ASSERT_TRUE(config.ok());
  std::set<std::string> in_template;
  for (const auto& [key, value] : config->parameters()) in_template.insert(key);
  std::set<std::string> in_table;
  for (const auto& name : LlmParams::ParameterNames()) in_table.insert(name);
  for (const auto& key : in_template) EXPECT_TRUE(in_table.count(key)) << key << " not in table";
  for (const auto& key : in_table) {
    // recv_poll_period_ms is read by NVIDIA's backend but not in its template.
    if (key == "recv_poll_period_ms") continue;
    EXPECT_TRUE(in_template.count(key)) << key << " not in the template";
  }
}

TEST(TemplatesTest, EnsembleMapsAsNvidias) {
  auto config = ParseModelConfigText(FillAll(TemplateText("ensemble")));
  ASSERT_TRUE(config.ok());
  const auto& steps = config->ensemble_scheduling().step();
  ASSERT_EQ(steps.size(), 3);
  EXPECT_EQ(steps[0].model_name(), "preprocessing");
  EXPECT_EQ(steps[0].input_map().at("QUERY"), "text_input");
  EXPECT_EQ(steps[0].input_map().at("REQUEST_OUTPUT_LEN"), "max_tokens");
  EXPECT_EQ(steps[1].model_name(), "tensorrt_llm");
  EXPECT_EQ(steps[1].model_version(), -1);
  EXPECT_EQ(steps[1].input_map().at("runtime_top_k"), "top_k");
  EXPECT_EQ(steps[1].input_map().at("runtime_top_p"), "top_p");
  EXPECT_EQ(steps[1].input_map().at("len_penalty"), "length_penalty");
  EXPECT_EQ(steps[1].input_map().at("streaming"), "stream");
  EXPECT_EQ(steps[1].input_map().at("input_ids"), "_INPUT_ID");
  EXPECT_EQ(steps[1].output_map().at("output_ids"), "_TOKENS_BATCH");
  EXPECT_EQ(steps[2].model_name(), "postprocessing");
  EXPECT_EQ(steps[2].output_map().at("OUTPUT"), "text_output");

  // Every ensemble input feeds a step, and every ensemble output comes from one.
  std::set<std::string> consumed, produced;
  for (const auto& step : steps) {
    for (const auto& [k, v] : step.input_map()) consumed.insert(v);
    for (const auto& [k, v] : step.output_map()) produced.insert(v);
  }
  for (const auto& input : config->input())
    EXPECT_TRUE(consumed.count(input.name())) << input.name();
  std::set<std::string> outputs;
  for (const auto& output : config->output()) {
    EXPECT_TRUE(produced.count(output.name())) << output.name();
    EXPECT_TRUE(outputs.insert(output.name()).second) << "duplicate output " << output.name();
  }
}

// tests/fuzz/corpus/tensorrt_llm.filled.pbtxt is the template filled the way NVIDIA's README
// does (tests/unit/tools/test_fill_template.py keeps it in sync with the template).
TEST(TemplatesTest, ReadmeFilledLlmConfigGivesTheReadmeSettings) {
  auto config = LoadModelConfigFile(
      (SourceDir() / "tests" / "fuzz" / "corpus" / "tensorrt_llm.filled.pbtxt").string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto p = LlmParams::FromModelConfig(*config);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(config->backend(), "inflight");
  EXPECT_EQ(p->max_batch_size, 64);
  EXPECT_FALSE(p->decoupled);
  EXPECT_EQ(p->max_queue_size, 0u);
  EXPECT_EQ(p->max_beam_width, 1);
  EXPECT_EQ(p->gpt_model_path, "engines/llama-7b");
  EXPECT_EQ(p->max_tokens_in_paged_kv_cache, std::optional<int64_t>(2560));
  ASSERT_TRUE(p->max_attention_window_size.has_value());
  EXPECT_EQ(*p->max_attention_window_size, std::vector<int32_t>{2560});
  EXPECT_DOUBLE_EQ(p->kv_cache_free_gpu_mem_fraction, 0.5);
  EXPECT_TRUE(p->exclude_input_in_output);
  EXPECT_FALSE(p->enable_kv_cache_reuse);
  EXPECT_EQ(p->batching_type, BatchingType::kInflightFusedBatching);
  // Not given: defaults.
  EXPECT_EQ(p->batch_scheduler_policy, SchedulerPolicy::kGuaranteedNoEvict);
  EXPECT_EQ(p->device, Device::kAuto);
}

// A hand-written config in NVIDIA's layout with priority queues, Python-style True and lookahead.
TEST(TemplatesTest, HandWrittenLookaheadConfig) {
  auto config = LoadModelConfigFile(
      (SourceDir() / "tests" / "fuzz" / "corpus" / "gpt_dynamic_batching.filled.pbtxt").string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto p = LlmParams::FromModelConfig(*config);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->decoupled);
  EXPECT_EQ(p->max_batch_size, 16);
  EXPECT_EQ(p->max_queue_size, 64u);
  EXPECT_EQ(p->max_queue_delay_microseconds, 100u);
  EXPECT_EQ(p->batch_scheduler_policy, SchedulerPolicy::kMaxUtilization);
  EXPECT_EQ(*p->max_attention_window_size, (std::vector<int32_t>{1024, 2048}));
  EXPECT_EQ(p->gpu_device_ids->size(), 2u);
  EXPECT_EQ(p->decoding_mode, DecodingMode::kLookahead);
  EXPECT_EQ(p->lookahead_ngram_size, std::optional<int32_t>(3));
  EXPECT_EQ(p->device, Device::kCpu);
  EXPECT_DOUBLE_EQ(p->kv_cache_free_gpu_mem_fraction, 0.9);
  EXPECT_EQ(config->dynamic_batching().priority_queue_policy().at(2).max_queue_size(), 8u);
}

}  // namespace
}  // namespace inflight::config
