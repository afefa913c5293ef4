#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/engine_config.h"

namespace inflight::model {
namespace {

using ::testing::HasSubstr;

// Llama 3.1 8B's config.json as published (trimmed of fields the mapping ignores).
constexpr const char* kLlama31 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256})";

TEST(HfConfigTest, Llama31) {
  auto c = EngineConfigFromHuggingFace(kLlama31, "llama/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, Architecture::kLlama);
  EXPECT_EQ(c->architecture_name, "LlamaForCausalLM");
  EXPECT_EQ(c->dtype, DType::kBFloat16);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->num_layers, 32);
  EXPECT_EQ(c->num_attention_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->intermediate_size, 14336);
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->norm, NormKind::kRmsNorm);
  EXPECT_EQ(c->activation, Activation::kSwiGlu);
  EXPECT_EQ(c->position_embedding, PositionEmbedding::kRope);
  EXPECT_EQ(c->norm_eps, 1e-5f);
  EXPECT_EQ(c->rope_theta, 500000.0f);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->factor, 8.0f);
  EXPECT_EQ(c->rope_scaling->low_freq_factor, 1.0f);
  EXPECT_EQ(c->rope_scaling->high_freq_factor, 4.0f);
  EXPECT_EQ(c->rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_FALSE(c->qkv_bias || c->attn_out_bias || c->mlp_bias || c->norm_bias);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_id, 128000);
  EXPECT_EQ(c->eos_token_id, 128001);  // the first of the list
}

TEST(HfConfigTest, RopeScalingSpellingsAndUnsupportedTypes) {
  std::string older = kLlama31;
  older.replace(older.find("\"rope_type\""), 11, "\"type\"");
  older.replace(older.find("\"factor\": 8.0"), 13, "\"factor\": 2.0");
  auto c = EngineConfigFromHuggingFace(older, "x");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->factor, 2.0f);

  std::string yarn = kLlama31;
  yarn.replace(yarn.find("\"llama3\""), 8, "\"yarn\"");
  auto y = EngineConfigFromHuggingFace(yarn, "x");
  EXPECT_EQ(y.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(y.status().message(), HasSubstr("rope_scaling type \"yarn\" is not supported"));
}

TEST(HfConfigTest, LlamaDefaultsAndExplicitHeadDim) {
  auto c = EngineConfigFromHuggingFace(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 96,
      "num_hidden_layers": 1, "num_attention_heads": 3, "intermediate_size": 10, "vocab_size": 7,
      "head_dim": 16, "attention_bias": true})",
                                       "x");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_kv_heads, 3);  // absent num_key_value_heads: multi-head attention
  EXPECT_EQ(c->head_dim, 16);     // from the config, not 96 / 3
  EXPECT_EQ(c->norm_eps, 1e-6f);
  EXPECT_EQ(c->rope_theta, 10000.0f);
  EXPECT_EQ(c->dtype, DType::kFloat16);  // no torch_dtype
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_TRUE(c->attn_out_bias);
  EXPECT_FALSE(c->bos_token_id.has_value());
}

TEST(HfConfigTest, MistralSlidingWindow) {
  const std::string base = R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
      "intermediate_size": 14336, "vocab_size": 32000, "max_position_embeddings": 32768,
      "rope_theta": 1000000.0, "torch_dtype": "bfloat16", "sliding_window": )";
  auto none = EngineConfigFromHuggingFace(base + "null}", "m");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->architecture, Architecture::kMistral);
  EXPECT_EQ(none->rope_theta, 1000000.0f);
  EXPECT_FALSE(none->qkv_bias);
  EXPECT_TRUE(EngineConfigFromHuggingFace(base + "32768}", "m").ok());
  auto windowed = EngineConfigFromHuggingFace(base + "4096}", "m/config.json");
  EXPECT_EQ(windowed.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(windowed.status().message(),
              HasSubstr("sliding_window 4096 < max_position_embeddings 32768"));
}

TEST(HfConfigTest, Qwen2HasQkvBias) {
  auto c =
      EngineConfigFromHuggingFace(R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896,
      "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
      "intermediate_size": 4864, "vocab_size": 151936, "max_position_embeddings": 32768,
      "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
      "use_sliding_window": false, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
      "bos_token_id": 151643, "eos_token_id": 151643})",
                                  "q");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, Architecture::kQwen2);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->attn_out_bias);
  EXPECT_FALSE(c->mlp_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->eos_token_id, 151643);
}

TEST(HfConfigTest, Gpt2) {
  // GPT-2 small's config.json (no torch_dtype in the original).
  auto c = EngineConfigFromHuggingFace(R"({"activation_function": "gelu_new",
      "architectures": ["GPT2LMHeadModel"], "bos_token_id": 50256, "eos_token_id": 50256,
      "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768,
      "n_head": 12, "n_inner": null, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257})",
                                       "gpt2");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, Architecture::kGpt2);
  EXPECT_EQ(c->hidden_size, 768);
  EXPECT_EQ(c->num_layers, 12);
  EXPECT_EQ(c->num_attention_heads, 12);
  EXPECT_EQ(c->num_kv_heads, 12);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->intermediate_size, 4 * 768);  // n_inner null
  EXPECT_EQ(c->max_position_embeddings, 1024);
  EXPECT_EQ(c->norm, NormKind::kLayerNorm);
  EXPECT_EQ(c->activation, Activation::kGeluNew);
  EXPECT_EQ(c->position_embedding, PositionEmbedding::kLearned);
  EXPECT_TRUE(c->qkv_bias && c->attn_out_bias && c->mlp_bias && c->norm_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_id, 50256);
  EXPECT_EQ(c->eos_token_id, 50256);
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LE(c->build.max_seq_len, 1024);  // left valid for a 1024-position model

  auto inner = EngineConfigFromHuggingFace(R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 64,
      "n_head": 4, "n_inner": 100, "n_layer": 1, "n_positions": 128, "vocab_size": 50,
      "activation_function": "relu"})",
                                           "g");
  EXPECT_EQ(inner.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(inner.status().message(), HasSubstr("activation_function \"relu\""));
}

TEST(HfConfigTest, UnknownArchitectureIsNamed) {
  auto c =
      EngineConfigFromHuggingFace(R"({"architectures": ["FooForCausalLM"]})", "/ckpt/config.json");
  EXPECT_EQ(c.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(c.status().message(),
            "Unsupported architecture \"FooForCausalLM\" in /ckpt/config.json: supported are "
            "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel");
}

TEST(HfConfigTest, MissingFieldIsNamed) {
  auto c = EngineConfigFromHuggingFace(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10})",
                                       "/ckpt/config.json");
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              HasSubstr("/ckpt/config.json: \"intermediate_size\" is required"));
}

}  // namespace
}  // namespace inflight::model
