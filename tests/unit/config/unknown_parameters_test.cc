#include "config/unknown_parameters.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "config/llm_params.h"

namespace inflight::config {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

inference::ModelConfig Config(const std::string& name,
                              const std::map<std::string, std::string>& params) {
  inference::ModelConfig config;
  config.set_name(name);
  for (const auto& [k, v] : params) (*config.mutable_parameters())[k].set_string_value(v);
  return config;
}

TEST(UnknownParametersTest, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("flaw", "lawn"), 2u);
  EXPECT_EQ(EditDistance("kv_cache_free_gpu_mem_fracton", "kv_cache_free_gpu_mem_fraction"), 1u);
  EXPECT_EQ(EditDistance("same", "same"), 0u);
}

TEST(UnknownParametersTest, NearestKeyPicksTheLeastDistantAndTheFirstOnATie) {
  const std::vector<std::string> known = {"streaming", "max_beam_width", "max_batch_width"};
  EXPECT_EQ(NearestKey("max_beam_widht", known), "max_beam_width");
  EXPECT_EQ(NearestKey("streeming", known), "streaming");
  // "max_b_width" is 3 edits from both widths: the first listed wins.
  EXPECT_EQ(NearestKey("max_b_width", known), "max_beam_width");
  EXPECT_EQ(NearestKey("x", {}), std::nullopt);
}

TEST(UnknownParametersTest, EachUnknownKeyIsNamedWithItsNearestKnownKey) {
  const auto config = Config("tensorrt_llm", {{"gpt_model_type", "inflight_fused_batching"},
                                              {"kv_cache_free_gpu_mem_fracton", "0.5"},
                                              {"enable_kv_cache_reuse", "true"},
                                              {"batch_sheduler_policy", "max_utilization"}});
  EXPECT_THAT(
      UnknownParameterWarnings(config, LlmParams::ParameterNames()),
      ElementsAre("model 'tensorrt_llm': unknown parameter \"batch_sheduler_policy\" is ignored; "
                  "the nearest known key is \"batch_scheduler_policy\"",
                  "model 'tensorrt_llm': unknown parameter \"kv_cache_free_gpu_mem_fracton\" is "
                  "ignored; the nearest known key is \"kv_cache_free_gpu_mem_fraction\""));
}

TEST(UnknownParametersTest, KnownKeysGiveNoWarning) {
  std::map<std::string, std::string> all;
  for (const std::string& key : LlmParams::ParameterNames()) all[key] = "${" + key + "}";
  EXPECT_THAT(UnknownParameterWarnings(Config("tensorrt_llm", all), LlmParams::ParameterNames()),
              IsEmpty());
}

TEST(UnknownParametersTest, LlmParamsStillLoadsAConfigWithAnUnknownKey) {
  auto p = LlmParams::FromModelConfig(
      Config("tensorrt_llm", {{"gpt_model_type", "inflight_fused_batching"},
                              {"gpt_model_path", "engines/gpt2"},
                              {"kv_cache_free_gpu_mem_fracton", "0.5"}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kv_cache_free_gpu_mem_fraction, 0.9);  // the default: the typo set nothing
}

}  // namespace
}  // namespace inflight::config
