#include "model/engine_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "unit/model_io/temp_dir.h"

namespace inflight::model {
namespace {

using ::testing::HasSubstr;

EngineConfig Llama3Like() {
  EngineConfig c;
  c.architecture_name = "LlamaForCausalLM";
  c.architecture = Architecture::kLlama;
  c.dtype = DType::kBFloat16;
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.num_layers = 32;
  c.num_attention_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 14336;
  c.norm_eps = 1e-5f;
  c.max_position_embeddings = 131072;
  c.rope.type = RopeType::kLlama3;
  c.rope.theta = 500000.0;
  c.rope.factor = 8.0;
  c.rope.low_freq_factor = 1.0;
  c.rope.high_freq_factor = 4.0;
  c.rope.original_max_position_embeddings = 8192;
  c.bos_token_id = 128000;
  c.eos_token_id = 128001;
  c.build = {64, 4096, 8192, 16384, 32};
  c.tp_size = 2;
  return c;
}

TEST(EngineConfigTest, JsonRoundTripKeepsEveryField) {
  EngineConfig c = Llama3Like();
  c.qkv_bias = true;
  c.tie_word_embeddings = true;
  auto back = EngineConfigFromJson(EngineConfigToJson(c), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->architecture, Architecture::kLlama);
  EXPECT_EQ(back->architecture_name, "LlamaForCausalLM");
  EXPECT_EQ(back->dtype, DType::kBFloat16);
  EXPECT_EQ(back->vocab_size, 128256);
  EXPECT_EQ(back->num_kv_heads, 8);
  EXPECT_EQ(back->head_dim, 128);
  EXPECT_EQ(back->intermediate_size, 14336);
  EXPECT_EQ(back->norm_eps, 1e-5f);
  EXPECT_EQ(back->rope.type, RopeType::kLlama3);
  EXPECT_EQ(back->rope.theta, 500000.0);
  EXPECT_EQ(back->rope.factor, 8.0);
  EXPECT_EQ(back->rope.high_freq_factor, 4.0);
  EXPECT_EQ(back->rope.original_max_position_embeddings, 8192);
  EXPECT_TRUE(back->qkv_bias);
  EXPECT_FALSE(back->attn_out_bias);
  EXPECT_TRUE(back->tie_word_embeddings);
  EXPECT_EQ(back->bos_token_id, 128000);
  EXPECT_EQ(back->eos_token_id, 128001);
  EXPECT_EQ(back->build.max_batch_size, 64);
  EXPECT_EQ(back->build.max_input_len, 4096);
  EXPECT_EQ(back->build.max_seq_len, 8192);
  EXPECT_EQ(back->build.max_num_tokens, 16384);
  EXPECT_EQ(back->build.tokens_per_block, 32);
  EXPECT_EQ(back->tp_size, 2);
  EXPECT_EQ(back->pp_size, 1);
  EXPECT_EQ(EngineConfigToJson(*back), EngineConfigToJson(c));
}

// Every rope type and its fields survive the round trip; the JSON holds only the type's fields.
TEST(EngineConfigTest, RopeOfEveryTypeRoundTrips) {
  for (RopeType type : {RopeType::kDefault, RopeType::kLinear, RopeType::kDynamic, RopeType::kYarn,
                        RopeType::kLlama3}) {
    SCOPED_TRACE(RopeTypeName(type));
    EngineConfig c = Llama3Like();
    c.rope = RopeConfig{};
    c.rope.type = type;
    c.rope.theta = 1000000.0;
    if (type != RopeType::kDefault) c.rope.factor = 4.0;
    if (type != RopeType::kDefault && type != RopeType::kLinear) {
      c.rope.original_max_position_embeddings = 32768;
    }
    if (type == RopeType::kYarn) {
      c.rope.beta_fast = 16.0;
      c.rope.mscale = 0.707;
      c.rope.truncate = false;
      c.rope.attention_factor = 1.1386294361119891;
    }
    const std::string text = EngineConfigToJson(c);
    const auto rope = nlohmann::json::parse(text)["rope"];
    EXPECT_EQ(rope["type"], RopeTypeName(type));
    EXPECT_EQ(rope.contains("factor"), type != RopeType::kDefault);
    EXPECT_EQ(rope.contains("low_freq_factor"), type == RopeType::kLlama3);
    EXPECT_EQ(rope.contains("beta_fast"), type == RopeType::kYarn);
    auto back = EngineConfigFromJson(text, "e");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->rope.type, type);
    EXPECT_EQ(back->rope.theta, 1000000.0);
    EXPECT_EQ(back->rope.factor, c.rope.factor);
    EXPECT_EQ(back->rope.original_max_position_embeddings, c.rope.original_max_position_embeddings);
    EXPECT_EQ(back->rope.beta_fast, c.rope.beta_fast);
    EXPECT_EQ(back->rope.mscale, c.rope.mscale);
    EXPECT_FALSE(back->rope.mscale_all_dim.has_value());
    EXPECT_EQ(back->rope.truncate, c.rope.truncate);
    EXPECT_EQ(back->rope.attention_factor, c.rope.attention_factor);  // exact: a double in JSON
    EXPECT_EQ(EngineConfigToJson(*back), text);
  }
}

// Engines built before version 2 keep loading: rope_theta and a llama3-only rope_scaling.
TEST(EngineConfigTest, ReadsVersion1Engines) {
  auto j = nlohmann::json::parse(EngineConfigToJson(Llama3Like()));
  j["version"] = 1;
  j.erase("rope");
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  auto c = EngineConfigFromJson(j.dump(), "v1");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope.type, RopeType::kLlama3);
  EXPECT_EQ(c->rope.theta, 500000.0);
  EXPECT_EQ(c->rope.factor, 8.0);
  EXPECT_EQ(c->rope.original_max_position_embeddings, 8192);
  EXPECT_EQ(c->rope.attention_factor, 1.0);
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = 10000.0;
  c = EngineConfigFromJson(j.dump(), "v1");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope.type, RopeType::kDefault);
  EXPECT_EQ(c->rope.theta, 10000.0);
  j["rope_scaling"] = {{"type", "yarn"}};
  EXPECT_THAT(EngineConfigFromJson(j.dump(), "v1").status().message(),
              HasSubstr("\"type\" is \"yarn\", expected \"llama3\""));
}

TEST(EngineConfigTest, CanonicalWindowsDropWhatMaxSeqLenMakesFull) {
  EngineConfig c = Llama3Like();  // max_seq_len 8192
  c.attention_windows = {4096, 8192, 0, 9000};
  c.attention_windows.resize(32, 0);
  CanonicalizeAttentionWindows(&c);
  ASSERT_EQ(c.attention_windows.size(), 32u);
  EXPECT_EQ(c.attention_windows[0], 4096);
  EXPECT_EQ(c.attention_windows[1], 0);  // sees all 8192 keys a sequence can have
  EXPECT_EQ(c.attention_windows[3], 0);
  c.attention_windows[0] = 8192;
  CanonicalizeAttentionWindows(&c);
  EXPECT_TRUE(c.attention_windows.empty());
}

TEST(EngineConfigTest, JsonFollowsTheDocumentedSpelling) {
  EngineConfig c = Llama3Like();
  c.rope = RopeConfig{};
  c.eos_token_id.reset();
  const auto j = nlohmann::json::parse(EngineConfigToJson(c));
  EXPECT_EQ(j["format"], "inflight-engine");
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["dtype"], "bfloat16");
  EXPECT_EQ(j["norm"], "rmsnorm");
  EXPECT_EQ(j["activation"], "swiglu");
  EXPECT_EQ(j["position_embedding"], "rope");
  EXPECT_EQ(j["norm_eps"].get<double>(), 1e-5);  // shortest form of the float, not 9.99999974e-06
  EXPECT_EQ(j["rope"],
            nlohmann::json({{"type", "default"}, {"theta", 10000.0}, {"attention_factor", 1.0}}));
  EXPECT_FALSE(j.contains("rope_theta"));
  EXPECT_TRUE(j["eos_token_id"].is_null());
  EXPECT_EQ(j["build"]["tokens_per_block"], 32);
  EXPECT_EQ(j["parallel"]["tp_size"], 2);
}

TEST(EngineConfigTest, FromJsonNamesTheBadField) {
  auto mutate = [](const std::function<void(nlohmann::json&)>& f) {
    auto j = nlohmann::json::parse(EngineConfigToJson(Llama3Like()));
    f(j);
    return EngineConfigFromJson(j.dump(), "engine/config.json");
  };
  auto r = mutate([](auto& j) { j["format"] = "hf"; });
  EXPECT_THAT(r.status().message(), HasSubstr("\"format\" is \"hf\""));
  r = mutate([](auto& j) { j["version"] = 3; });
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(r.status().message(), HasSubstr("reads versions 1 and 2"));
  r = mutate([](auto& j) { j["rope"]["type"] = "longrope"; });
  EXPECT_THAT(r.status().message(),
              HasSubstr("rope: \"type\" is \"longrope\", expected one of: default, linear"));
  r = mutate([](auto& j) { j["rope"].erase("low_freq_factor"); });
  EXPECT_THAT(r.status().message(), HasSubstr("\"low_freq_factor\" is required"));
  r = mutate([](auto& j) { j["rope"]["high_freq_factor"] = 0.5; });
  EXPECT_THAT(r.status().message(), HasSubstr("high_freq_factor 0.5 must be > low_freq_factor"));
  r = mutate([](auto& j) { j["rope"] = nullptr; });
  EXPECT_THAT(r.status().message(), HasSubstr("\"rope\" is null, expected an object"));
  r = mutate([](auto& j) { j.erase("head_dim"); });
  EXPECT_THAT(r.status().message(), HasSubstr("engine/config.json: \"head_dim\" is required"));
  r = mutate([](auto& j) { j["norm"] = "batchnorm"; });
  EXPECT_THAT(r.status().message(),
              HasSubstr("\"norm\" is \"batchnorm\", expected one of: rmsnorm"));
  r = mutate([](auto& j) { j["dtype"] = "int8"; });
  EXPECT_THAT(r.status().message(), HasSubstr("\"dtype\" is \"int8\""));
  r = mutate([](auto& j) { j["hidden_size"] = "big"; });
  EXPECT_THAT(r.status().message(), HasSubstr("\"hidden_size\" is \"big\", expected an integer"));
  r = mutate([](auto& j) { j["build"]["tokens_per_block"] = 48; });
  EXPECT_THAT(r.status().message(), HasSubstr("tokens_per_block 48 is not a power of two"));
  r = mutate([](auto& j) { j["parallel"]["tp_size"] = 3; });
  EXPECT_THAT(r.status().message(), HasSubstr("tp_size 3 does not divide num_attention_heads 32"));
  r = mutate([](auto& j) { j["architecture"] = "BertModel"; });
  EXPECT_THAT(r.status().message(), HasSubstr("\"BertModel\""));
  EXPECT_THAT(EngineConfigFromJson("[1]", "x").status().message(), HasSubstr("JSON object"));
  EXPECT_THAT(EngineConfigFromJson("{", "x").status().message(), HasSubstr("not valid JSON"));
}

TEST(EngineConfigTest, ValidateChecksHeadsAndLimits) {
  EngineConfig c = Llama3Like();
  EXPECT_TRUE(c.Validate().ok());
  c.tp_size = 16;  // more ranks than kv heads: kv heads replicate, 16 % 8 == 0
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.LocalKvHeads(16), 1);
  EXPECT_EQ(c.QkvRows(16), (2 + 2) * 128);
  c.num_kv_heads = 6;
  c.num_attention_heads = 36;
  c.tp_size = 4;  // 6 kv heads over 4 ranks: neither divides the other
  EXPECT_THAT(c.Validate().message(), HasSubstr("num_kv_heads 6"));
  c = Llama3Like();
  c.build.max_seq_len = 100;  // below max_input_len 4096
  EXPECT_THAT(c.Validate().message(), HasSubstr("max_seq_len 100 is outside [4096"));
  c = Llama3Like();
  c.pp_size = 2;
  EXPECT_TRUE(c.Validate().ok());
  c.pp_size = 33;  // more stages than the 32 layers
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.Validate().message(), HasSubstr("pp_size 33 must be in [1, num_layers 32]"));
  c.pp_size = 0;
  EXPECT_THAT(c.Validate().message(), HasSubstr("pp_size 0 must be in [1, num_layers 32]"));
}

TEST(EngineConfigTest, SaveAndLoadThroughADirectory) {
  testing::TempDir dir;
  ASSERT_TRUE(SaveEngineConfig(Llama3Like(), dir.path()).ok());
  auto c = LoadEngineConfig(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_layers, 32);
  testing::TempDir empty;
  auto missing = LoadEngineConfig(empty.path());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("config.json"));
}

}  // namespace
}  // namespace inflight::model
