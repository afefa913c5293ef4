// RoPE of every type against transformers' formulas: tests/unit/kernels_cpu/rope_golden.json holds
// inverse frequencies, attention factors and rotated vectors that rope_reference.py computed the
// way transformers 5 does (fp32 steps included). Each case goes through the whole path: a
// config.json with the case's rope_parameters → ReadHuggingFaceConfig → the engine's frequency
// table (model/rope_frequencies.h) and kernels/cpu ApplyRope.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/cpu/rope.h"
#include "model/hf_config.h"
#include "model/rope_frequencies.h"

namespace inflight::model {
namespace {

using json = nlohmann::json;

json Golden() {
  const char* src = std::getenv("INFLIGHT_SOURCE_DIR");
  const auto path = std::filesystem::path(src ? src : INFLIGHT_TEST_SOURCE_DIR) / "tests" / "unit" /
                    "kernels_cpu" / "rope_golden.json";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "missing " << path;
  return json::parse(in);
}

// The engine config of a two-head Llama whose config.json (5.x layout) has the case's rope.
EngineConfig ConfigOf(const json& c) {
  const std::int64_t head_dim = c["head_dim"];
  json hf = {{"architectures", {"LlamaForCausalLM"}},
             {"hidden_size", 2 * head_dim},
             {"num_attention_heads", 2},
             {"num_hidden_layers", 1},
             {"intermediate_size", 8},
             {"vocab_size", 16},
             {"max_position_embeddings", c["max_position_embeddings"]},
             {"rope_parameters", c["rope"]},
             {"dtype", "float32"}};
  auto r = ReadHuggingFaceConfig(hf.dump(), c["name"].get<std::string>());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EngineConfig config = r.ok() ? r->config : EngineConfig{};
  config.build.max_seq_len = 1 << 20;  // lets dynamic RoPE grow past max_position_embeddings
  return config;
}

TEST(RopeGoldenTest, FrequenciesAndAttentionFactorMatchTransformers) {
  const json golden = Golden();
  ASSERT_EQ(golden["format"], "inflight-rope-golden");
  for (const json& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const EngineConfig config = ConfigOf(c);
    const auto expected = c["inv_freq"].get<std::vector<double>>();
    std::vector<float> ours(expected.size());
    if (c.contains("seq_len")) {
      EXPECT_TRUE(RopeVariesWithLength(config));
      RopeInvFrequenciesForLength(config, c["seq_len"], ours.data());
    } else {
      ours = RopeInvFrequencies(config);
    }
    ASSERT_EQ(ours.size(), expected.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
      // A few fp32 ulps: transformers rounds every tensor step to fp32, the engine once.
      EXPECT_NEAR(ours[i], expected[i], std::fabs(expected[i]) * 1e-6) << "inv_freq[" << i << "]";
    }
    EXPECT_NEAR(RopeScale(config), c["attention_factor"].get<double>(), 1e-7);
  }
}

TEST(RopeGoldenTest, RotationsMatchTransformers) {
  const json golden = Golden();
  for (const json& rot : golden["rotations"]) {
    SCOPED_TRACE(rot["case"].get<std::string>());
    const json* c = nullptr;
    for (const json& k : golden["cases"]) {
      if (k["name"] == rot["case"]) c = &k;
    }
    ASSERT_NE(c, nullptr);
    const std::int64_t head_dim = (*c)["head_dim"], heads = rot["heads"];
    const auto inv = (*c)["inv_freq"].get<std::vector<float>>();
    const auto positions = rot["positions"].get<std::vector<std::int32_t>>();
    auto x = rot["x"].get<std::vector<float>>();
    const auto expected = rot["expected"].get<std::vector<double>>();
    kernels::cpu::ApplyRope(x.data(), static_cast<std::int64_t>(positions.size()), heads, head_dim,
                            heads * head_dim, positions.data(), inv.data(),
                            static_cast<float>((*c)["attention_factor"].get<double>()));
    ASSERT_EQ(x.size(), expected.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(x[i], expected[i], 2e-6) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace inflight::model
