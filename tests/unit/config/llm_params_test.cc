#include "config/llm_params.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

namespace inflight::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

inference::ModelConfig Config(const std::map<std::string, std::string>& params) {
  inference::ModelConfig config;
  config.set_name("tensorrt_llm");
  for (const auto& [k, v] : params) (*config.mutable_parameters())[k].set_string_value(v);
  return config;
}

// The minimum a working config needs: a batching type and an engine.
std::map<std::string, std::string> Minimal() {
  return {{"gpt_model_type", "inflight_fused_batching"}, {"gpt_model_path", "engines/gpt2"}};
}

std::map<std::string, std::string> MinimalWith(const std::string& key, const std::string& value) {
  auto params = Minimal();
  params[key] = value;
  return params;
}

std::string ErrorOf(const std::map<std::string, std::string>& params) {
  auto p = LlmParams::FromModelConfig(Config(params));
  if (p.ok()) return "<ok>";
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  return p.status().message();
}

TEST(LlmParamsTest, DefaultsWhenOnlyRequiredKeysAreSet) {
  auto p = LlmParams::FromModelConfig(Config(Minimal()));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->batching_type, BatchingType::kInflightFusedBatching);
  EXPECT_EQ(p->gpt_model_path, "engines/gpt2");
  EXPECT_EQ(p->max_beam_width, 1);
  EXPECT_EQ(p->batch_scheduler_policy, SchedulerPolicy::kGuaranteedNoEvict);
  EXPECT_DOUBLE_EQ(p->kv_cache_free_gpu_mem_fraction, 0.9);
  EXPECT_FALSE(p->max_tokens_in_paged_kv_cache.has_value());
  EXPECT_FALSE(p->max_attention_window_size.has_value());
  EXPECT_TRUE(p->enable_kv_cache_reuse);
  EXPECT_TRUE(p->normalize_log_probs);
  EXPECT_TRUE(p->kv_cache_onboard_blocks);
  EXPECT_FALSE(p->enable_chunked_context);
  EXPECT_FALSE(p->exclude_input_in_output);
  EXPECT_EQ(p->cancellation_check_period_ms, 100);
  EXPECT_EQ(p->stats_check_period_ms, 100);
  EXPECT_EQ(p->iter_stats_max_iterations, 1000);
  EXPECT_EQ(p->request_stats_max_iterations, 0);
  EXPECT_EQ(p->lora_cache_optimal_adapter_size, 8);
  EXPECT_EQ(p->lora_cache_max_adapter_size, 64);
  EXPECT_DOUBLE_EQ(p->lora_cache_gpu_memory_fraction, 0.05);
  EXPECT_EQ(p->lora_cache_host_memory_bytes, int64_t{1} << 30);
  EXPECT_EQ(p->decoding_mode, DecodingMode::kAuto);
  EXPECT_DOUBLE_EQ(p->gpu_weights_percent, 1.0);
  EXPECT_TRUE(p->multi_block_mode);
  EXPECT_FALSE(p->num_nodes.has_value());
  EXPECT_EQ(p->device, Device::kAuto);
  EXPECT_FALSE(p->gpu_device_ids.has_value());
}

TEST(LlmParamsTest, PlaceholdersMeanDefaults) {
  auto params = Minimal();
  for (const std::string& key : LlmParams::ParameterNames()) {
    if (params.count(key) == 0) params[key] = "${" + key + "}";
  }
  params["kv_cache_free_gpu_mem_fraction"] = "";  // empty is unset too
  auto p = LlmParams::FromModelConfig(Config(params));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto defaults = LlmParams::FromModelConfig(Config(Minimal()));
  ASSERT_TRUE(defaults.ok());
  EXPECT_DOUBLE_EQ(p->kv_cache_free_gpu_mem_fraction, defaults->kv_cache_free_gpu_mem_fraction);
  EXPECT_EQ(p->max_beam_width, defaults->max_beam_width);
  EXPECT_EQ(p->batch_scheduler_policy, defaults->batch_scheduler_policy);
  EXPECT_EQ(p->decoding_mode, defaults->decoding_mode);
  EXPECT_EQ(p->device, defaults->device);
  EXPECT_EQ(p->executor_worker_path, "");
  EXPECT_EQ(p->tokenizer_dir, "");
  EXPECT_FALSE(p->lookahead_window_size.has_value());
}

TEST(LlmParamsTest, ParsesEveryKind) {
  auto p = LlmParams::FromModelConfig(Config({
      {"gpt_model_type", "V1"},
      {"gpt_model_path", "e"},
      {"max_beam_width", "4"},
      {"max_tokens_in_paged_kv_cache", "2560"},
      {"max_attention_window_size", "1024,2048"},
      {"batch_scheduler_policy", "max_utilization"},
      {"kv_cache_free_gpu_mem_fraction", "1"},
      {"enable_kv_cache_reuse", "False"},
      {"gpu_device_ids", "0,1;2,3"},
      {"medusa_choices", "{0,0,0},{0,1}"},
      {"decoding_mode", "beam_search"},
      {"device", "cpu"},
      {"FORCE_CPU_ONLY_INPUT_TENSORS", "no"},
      {"guided_decoding_backend", "xgrammar"},
      {"some_unknown_key", "whatever"},
  }));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->batching_type, BatchingType::kV1);
  EXPECT_EQ(p->max_beam_width, 4);
  EXPECT_EQ(p->max_tokens_in_paged_kv_cache, std::optional<int64_t>(2560));
  EXPECT_THAT(*p->max_attention_window_size, ElementsAre(1024, 2048));
  EXPECT_EQ(p->batch_scheduler_policy, SchedulerPolicy::kMaxUtilization);
  EXPECT_DOUBLE_EQ(p->kv_cache_free_gpu_mem_fraction, 1.0);
  EXPECT_FALSE(p->enable_kv_cache_reuse);
  ASSERT_EQ(p->gpu_device_ids->size(), 2u);
  EXPECT_THAT((*p->gpu_device_ids)[1], ElementsAre(2, 3));
  ASSERT_EQ(p->medusa_choices->size(), 2u);
  EXPECT_THAT((*p->medusa_choices)[0], ElementsAre(0, 0, 0));
  EXPECT_EQ(p->decoding_mode, DecodingMode::kBeamSearch);
  EXPECT_EQ(p->device, Device::kCpu);
  EXPECT_FALSE(p->force_cpu_only_input_tensors);
  EXPECT_EQ(p->guided_decoding_backend, "xgrammar");
}

// The conversion settings of a Hugging Face folder as gpt_model_path (ours).
TEST(LlmParamsTest, HuggingFaceFolderBuildSettings) {
  auto defaults = LlmParams::FromModelConfig(Config(Minimal()));
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->engine_cache_dir, "");
  EXPECT_EQ(defaults->build_dtype, "");
  EXPECT_FALSE(defaults->build_max_seq_len.has_value());
  auto p = LlmParams::FromModelConfig(Config({{"gpt_model_type", "inflight_fused_batching"},
                                              {"gpt_model_path", "/models/Llama-3.1-8B"},
                                              {"engine_cache_dir", "/cache/engines"},
                                              {"build_dtype", "bfloat16"},
                                              {"build_max_input_len", "2048"},
                                              {"build_max_seq_len", "4096"},
                                              {"build_max_num_tokens", "16384"},
                                              {"build_tokens_per_block", "32"}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->engine_cache_dir, "/cache/engines");
  EXPECT_EQ(p->build_dtype, "bfloat16");
  EXPECT_EQ(p->build_max_input_len, 2048);
  EXPECT_EQ(p->build_max_seq_len, 4096);
  EXPECT_EQ(p->build_max_num_tokens, 16384);
  EXPECT_EQ(p->build_tokens_per_block, 32);
  EXPECT_THAT(ErrorOf(MinimalWith("build_dtype", "int8")), HasSubstr("build_dtype"));
  EXPECT_THAT(ErrorOf(MinimalWith("build_max_seq_len", "0")), HasSubstr("build_max_seq_len"));
  EXPECT_EQ(ErrorOf(MinimalWith("build_tokens_per_block", "48")),
            "build_tokens_per_block 48 is not a power of two in [1, 1024] (accepted: 1, 2, 4, "
            "..., 1024)");
}

TEST(LlmParamsTest, GptModelTypeSpellings) {
  for (const char* v1 : {"V1", "v1"}) {
    EXPECT_EQ(LlmParams::FromModelConfig(Config(MinimalWith("gpt_model_type", v1)))->batching_type,
              BatchingType::kV1);
  }
  for (const char* ifb : {"inflight_batching", "inflight_fused_batching"}) {
    EXPECT_EQ(LlmParams::FromModelConfig(Config(MinimalWith("gpt_model_type", ifb)))->batching_type,
              BatchingType::kInflightFusedBatching);
  }
}

TEST(LlmParamsTest, BusyPollIsAutoTrueOrFalse) {
  EXPECT_EQ(LlmParams::FromModelConfig(Config(Minimal()))->busy_poll, std::nullopt);
  EXPECT_EQ(LlmParams::FromModelConfig(Config(MinimalWith("busy_poll", "auto")))->busy_poll,
            std::nullopt);
  EXPECT_EQ(LlmParams::FromModelConfig(Config(MinimalWith("busy_poll", "true")))->busy_poll,
            std::optional<bool>(true));
  EXPECT_EQ(LlmParams::FromModelConfig(Config(MinimalWith("busy_poll", "false")))->busy_poll,
            std::optional<bool>(false));
  // As fill_template.py users write booleans (decoupled_mode:False).
  EXPECT_EQ(LlmParams::FromModelConfig(Config(MinimalWith("busy_poll", "True")))->busy_poll,
            std::optional<bool>(true));
  EXPECT_EQ(ErrorOf(MinimalWith("busy_poll", "sometimes")),
            "busy_poll \"sometimes\" is not one of: auto, true, false");
}

TEST(LlmParamsTest, ErrorMessages) {
  EXPECT_EQ(
      ErrorOf(MinimalWith("gpt_model_type", "foo")),
      "Invalid gpt_model_type \"foo\". Must be v1/inflight_batching/inflight_fused_batching.");
  EXPECT_EQ(ErrorOf(MinimalWith("gpt_model_type", "${batching_strategy}")),
            "Invalid gpt_model_type \"${batching_strategy}\". Must be "
            "v1/inflight_batching/inflight_fused_batching.");
  EXPECT_EQ(ErrorOf({{"gpt_model_path", "e"}}),
            "Invalid gpt_model_type \"\". Must be v1/inflight_batching/inflight_fused_batching.");
  EXPECT_EQ(ErrorOf(MinimalWith("batch_scheduler_policy", "max_util")),
            "batch_scheduler_policy \"max_util\" is not one of: max_utilization, "
            "guaranteed_no_evict");
  EXPECT_EQ(ErrorOf(MinimalWith("kv_cache_free_gpu_mem_fraction", "1.5")),
            "kv_cache_free_gpu_mem_fraction 1.5 is out of range: must be in (0, 1]");
  EXPECT_EQ(ErrorOf(MinimalWith("kv_cache_free_gpu_mem_fraction", "0")),
            "kv_cache_free_gpu_mem_fraction 0 is out of range: must be in (0, 1]");
  EXPECT_EQ(
      ErrorOf(MinimalWith("kv_cache_free_gpu_mem_fraction", "abc")),
      "Invalid value \"abc\" for parameter kv_cache_free_gpu_mem_fraction: expected a number");
  EXPECT_EQ(ErrorOf(MinimalWith("max_beam_width", "two")),
            "Invalid value \"two\" for parameter max_beam_width: expected an integer");
  EXPECT_EQ(ErrorOf(MinimalWith("max_beam_width", "0")),
            "max_beam_width 0 is out of range: must be >= 1");
  EXPECT_EQ(ErrorOf(MinimalWith("max_beam_width", "3000000000")),
            "max_beam_width 3000000000 is out of range: must be in [-2147483648, 2147483647]");
  EXPECT_EQ(ErrorOf(MinimalWith("enable_kv_cache_reuse", "maybe")),
            "Invalid value \"maybe\" for parameter enable_kv_cache_reuse: expected true or false");
  EXPECT_EQ(ErrorOf(MinimalWith("max_attention_window_size", "0,4096")),
            "max_attention_window_size 0 is out of range: must be >= 1");
  EXPECT_EQ(ErrorOf(MinimalWith("decoding_mode", "greedy")),
            "decoding_mode \"greedy\" is not one of: auto, top_k, top_p, top_k_top_p, beam_search, "
            "medusa, redrafter, lookahead, eagle");
  EXPECT_EQ(ErrorOf(MinimalWith("device", "tpu")), "device \"tpu\" is not one of: auto, cuda, cpu");
  EXPECT_EQ(ErrorOf({{"gpt_model_type", "v1"}}),
            "gpt_model_path and encoder_model_path are both empty: set gpt_model_path (template "
            "key engine_dir) to the engine directory");
}

TEST(LlmParamsTest, EncoderOnlyPathIsEnough) {
  auto p = LlmParams::FromModelConfig(
      Config({{"gpt_model_type", "v1"}, {"encoder_model_path", "engines/enc"}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->encoder_model_path, "engines/enc");
}

TEST(LlmParamsTest, LookaheadParamsRequiredIffLookahead) {
  auto params = MinimalWith("decoding_mode", "lookahead");
  const std::string missing =
      "decoding_mode \"lookahead\" requires lookahead_window_size, lookahead_ngram_size and "
      "lookahead_verification_set_size";
  EXPECT_EQ(ErrorOf(params), missing);
  params["lookahead_window_size"] = "4";
  params["lookahead_ngram_size"] = "3";
  EXPECT_EQ(ErrorOf(params), missing);
  params["lookahead_verification_set_size"] = "2";
  auto p = LlmParams::FromModelConfig(Config(params));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->lookahead_window_size, std::optional<int32_t>(4));
  EXPECT_EQ(p->lookahead_ngram_size, std::optional<int32_t>(3));
  EXPECT_EQ(p->lookahead_verification_set_size, std::optional<int32_t>(2));

  EXPECT_EQ(ErrorOf(MinimalWith("lookahead_ngram_size", "3")),
            "lookahead_window_size, lookahead_ngram_size and lookahead_verification_set_size are "
            "only used with decoding_mode \"lookahead\", but decoding_mode is \"auto\"");
}

TEST(LlmParamsTest, ModelLevelSettings) {
  auto config = Config(Minimal());
  config.set_max_batch_size(64);
  config.mutable_model_transaction_policy()->set_decoupled(true);
  config.mutable_dynamic_batching()->set_max_queue_delay_microseconds(250);
  config.mutable_dynamic_batching()->mutable_default_queue_policy()->set_max_queue_size(128);
  auto p = LlmParams::FromModelConfig(config);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->model_name, "tensorrt_llm");
  EXPECT_EQ(p->max_batch_size, 64);
  EXPECT_TRUE(p->decoupled);
  EXPECT_EQ(p->max_queue_size, 128u);
  EXPECT_EQ(p->max_queue_delay_microseconds, 250u);

  config.set_max_batch_size(-1);
  auto bad = LlmParams::FromModelConfig(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "max_batch_size -1 is out of range: must be >= 0");
}

TEST(LlmParamsTest, ParameterNamesAreUnique) {
  auto names = LlmParams::ParameterNames();
  std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size());
  EXPECT_TRUE(unique.count("device"));
  EXPECT_TRUE(unique.count("gpt_model_type"));
}

TEST(LlmParamsTest, EnumNames) {
  EXPECT_EQ(BatchingTypeName(BatchingType::kV1), "v1");
  EXPECT_EQ(SchedulerPolicyName(SchedulerPolicy::kMaxUtilization), "max_utilization");
  EXPECT_EQ(DecodingModeName(DecodingMode::kTopKTopP), "top_k_top_p");
  EXPECT_EQ(DeviceName(Device::kCuda), "cuda");
}

// Parsing accepts every value NVIDIA's backend accepts; CheckServed then refuses by name the ones
// that ask for a feature this engine does not have, and passes the ones that only tune
// TensorRT-LLM.
TEST(LlmParamsTest, CheckServedRefusesFeaturesByName) {
  const std::pair<std::pair<const char*, const char*>, const char*> cases[] = {
      {{"encoder_model_path", "engines/enc"},
       "encoder_model_path \"engines/enc\" is not supported"},
      {{"cross_kv_cache_fraction", "0.5"}, "cross_kv_cache_fraction \"0.5\" is not supported"},
      {{"lora_prefetch_dir", "/loras"}, "lora_prefetch_dir \"/loras\" is not supported"},
      {{"decoding_mode", "beam_search"}, "decoding_mode \"beam_search\" is not supported"},
      {{"decoding_mode", "medusa"}, "decoding_mode \"medusa\" is not supported"},
      {{"medusa_choices", "{0,0,0},{0,1}"}, "medusa_choices \"...\" is not supported"},
      {{"eagle_choices", "{0}"}, "eagle_choices \"...\" is not supported"},
      {{"speculative_decoding_fast_logits", "true"}, "speculative_decoding_fast_logits"},
      {{"gpu_weights_percent", "0.5"}, "gpu_weights_percent \"0.5\" is not supported"},
      {{"guided_decoding_backend", "xgrammar"}, "guided_decoding_backend \"xgrammar\""},
  };
  for (const auto& [kv, message] : cases) {
    auto p = LlmParams::FromModelConfig(Config(MinimalWith(kv.first, kv.second)));
    ASSERT_TRUE(p.ok()) << kv.first << ": " << p.status().ToString();
    const Status st = p->CheckServed();
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << kv.first;
    EXPECT_THAT(st.message(), HasSubstr(message)) << kv.first;
  }
  for (const auto& [key, value] : std::vector<std::pair<const char*, const char*>>{
           {"decoding_mode", "top_k_top_p"},
           {"gpu_weights_percent", "1.0"},
           {"multi_block_mode", "false"},
           {"cuda_graph_mode", "true"},
           {"lora_cache_gpu_memory_fraction", "0.1"}}) {
    auto p = LlmParams::FromModelConfig(Config(MinimalWith(key, value)));
    ASSERT_TRUE(p.ok()) << key << ": " << p.status().ToString();
    EXPECT_TRUE(p->CheckServed().ok()) << key << ": " << p->CheckServed().ToString();
  }
}

}  // namespace
}  // namespace inflight::config
