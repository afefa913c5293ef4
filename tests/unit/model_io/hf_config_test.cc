// Hugging Face config.json reading: precedence between the 4.x and 5.x keys, the class defaults,
// every refusal with its message, the unread-key list, and the field table against the readers.
#include "model/hf_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

namespace inflight::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

json TinyLlama() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
      "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 256,
      "rope_theta": 10000.0, "rope_scaling": null, "torch_dtype": "bfloat16"})");
}

json Tiny(const char* architecture) {
  json j = TinyLlama();
  j["architectures"] = {architecture};
  return j;
}

json TinyGpt2() {
  return json::parse(R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_head": 4,
      "n_layer": 2, "n_positions": 128, "vocab_size": 100, "activation_function": "gelu_new"})");
}

Result<HfConfigReading> Read(const json& j) {
  return ReadHuggingFaceConfig(j.dump(), "ckpt/config.json");
}

std::string ErrorOf(const json& j) {
  auto r = Read(j);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

TEST(HfConfigTest, RopeScalingWinsOverRopeParametersAndTheLoserIsListed) {
  json j = TinyLlama();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5.0}};
  auto r = Read(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.rope.type, RopeType::kLinear);
  EXPECT_EQ(r->config.rope.factor, 2.0);
  EXPECT_EQ(r->config.rope.theta, 10000.0);  // top-level rope_theta; rope_parameters ignored
  EXPECT_THAT(r->unread_keys, ElementsAre("rope_parameters"));
}

// rope_parameters' own rope_theta wins over a top-level one (standardize_rope_params' setdefault).
TEST(HfConfigTest, RopeThetaInsideTheObjectWins) {
  json j = TinyLlama();
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000}};
  auto r = Read(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.rope.theta, 1e6);
  j.erase("rope_theta");
  j["rope_parameters"].erase("rope_theta");
  r = Read(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.rope.theta, 10000.0);  // default_theta
}

TEST(HfConfigTest, DtypeWinsOverTorchDtype) {
  json j = TinyLlama();
  j["dtype"] = "float16";
  auto r = Read(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config_dtype, DType::kFloat16);
  EXPECT_EQ(r->config.dtype, DType::kFloat16);
  j.erase("dtype");
  j.erase("torch_dtype");
  r = Read(j);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->config_dtype.has_value());
  j["torch_dtype"] = "float64";
  r = Read(j);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->config_dtype.has_value());
  EXPECT_EQ(r->config_dtype_text, "float64");  // the builder refuses it unless --dtype is given
}

TEST(HfConfigTest, ClassDefaultsForAbsentKeys) {
  json mistral = Tiny("MistralForCausalLM");
  mistral.erase("num_key_value_heads");
  mistral["num_attention_heads"] = 8;
  auto r = Read(mistral);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.num_kv_heads, 8);  // MistralConfig's default
  // MistralConfig's default sliding_window, 4096, on every layer.
  EXPECT_THAT(r->config.attention_windows, ElementsAre(4096, 4096));
  mistral["num_key_value_heads"] = nullptr;
  mistral["num_attention_heads"] = 4;
  mistral["sliding_window"] = nullptr;
  r = Read(mistral);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.num_kv_heads, 4);  // null: num_attention_heads
  EXPECT_TRUE(r->config.attention_windows.empty());

  json qwen3 = Tiny("Qwen3ForCausalLM");
  r = Read(qwen3);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.head_dim, 128);  // Qwen3Config's head_dim, not 64 / 4
  EXPECT_TRUE(r->config.qk_norm);
  EXPECT_FALSE(r->config.qkv_bias);
  qwen3["attention_bias"] = true;
  r = Read(qwen3);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->config.qkv_bias && r->config.attn_out_bias);

  json qwen2 = Tiny("Qwen2ForCausalLM");
  qwen2.erase("num_key_value_heads");
  qwen2["num_attention_heads"] = 32;
  qwen2["hidden_size"] = 128;
  qwen2.erase("max_position_embeddings");
  r = Read(qwen2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.num_kv_heads, 32);
  EXPECT_EQ(r->config.head_dim, 4);
  EXPECT_EQ(r->config.max_position_embeddings, 32768);
  EXPECT_TRUE(r->config.qkv_bias);
  EXPECT_FALSE(r->config.attn_out_bias);

  json llama = TinyLlama();
  llama.erase("max_position_embeddings");
  llama.erase("rope_theta");
  llama["hidden_act"] = "swish";
  r = Read(llama);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.max_position_embeddings, 2048);
  EXPECT_EQ(r->config.norm_eps, 1e-6f);
  EXPECT_EQ(r->config.rope.theta, 10000.0);
  EXPECT_FALSE(r->config.tie_word_embeddings);

  json gpt2 = TinyGpt2();
  r = Read(gpt2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->config.tie_word_embeddings);
  EXPECT_EQ(r->config.intermediate_size, 256);
}

TEST(HfConfigTest, YarnParameters) {
  json j = Tiny("Qwen2ForCausalLM");
  j["max_position_embeddings"] = 131072;
  j["rope_scaling"] = {
      {"type", "yarn"}, {"factor", nullptr}, {"original_max_position_embeddings", 32768},
      {"beta_fast", 0}, {"beta_slow", 2},    {"truncate", false}};
  auto r = Read(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const RopeConfig& y = r->config.rope;
  EXPECT_EQ(y.type, RopeType::kYarn);
  EXPECT_EQ(y.factor, 4.0);      // null: max_position_embeddings / original
  EXPECT_EQ(y.beta_fast, 32.0);  // `or 32`: 0 takes the default
  EXPECT_EQ(y.beta_slow, 2.0);
  EXPECT_FALSE(y.truncate);
  EXPECT_DOUBLE_EQ(y.attention_factor, 0.1 * std::log(4.0) + 1.0);

  j["rope_scaling"]["factor"] = 40.0;
  j["rope_scaling"]["mscale"] = 1.0;
  j["rope_scaling"]["mscale_all_dim"] = 0.5;
  r = Read(j);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->config.rope.attention_factor,
                   (0.1 * std::log(40.0) + 1.0) / (0.05 * std::log(40.0) + 1.0));
  j["rope_scaling"]["attention_factor"] = 1.5;
  r = Read(j);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.rope.attention_factor, 1.5);

  // A top-level original_max_position_embeddings (Phi-3's layout) wins over the object's.
  j["original_max_position_embeddings"] = 4096;
  r = Read(j);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.rope.original_max_position_embeddings, 4096);
  // Absent everywhere: max_position_embeddings.
  j.erase("original_max_position_embeddings");
  j["rope_scaling"].erase("original_max_position_embeddings");
  r = Read(j);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.rope.original_max_position_embeddings, 131072);
}

TEST(HfConfigTest, QwenLayerTypesAndMaxWindowLayers) {
  json j = Tiny("Qwen2ForCausalLM");
  j["num_hidden_layers"] = 4;
  j["use_sliding_window"] = true;
  j["sliding_window"] = 64;
  j["max_window_layers"] = 1;
  auto r = Read(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(r->config.attention_windows, ElementsAre(0, 64, 64, 64));
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  r = Read(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(r->config.attention_windows, ElementsAre(64, 0, 64, 0));  // layer_types win
  j.erase("layer_types");
  j["use_sliding_window"] = false;
  r = Read(j);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->config.attention_windows.empty());  // every layer full
}

// Each refusal names the field, the value and what is supported.
TEST(HfConfigTest, RefusalsNameFieldValueAndWhatIsSupported) {
  json j = TinyLlama();
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 10000.0}};
  EXPECT_EQ(ErrorOf(j),
            "ckpt/config.json rope_parameters rope_type \"longrope\" is not supported; "
            "supported: default, linear, dynamic, yarn, llama3");
  j = TinyLlama();
  j["rope_scaling"] = {{"type", "su"}, {"factor", 2.0}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("rope_scaling rope_type \"su\" is not supported"));
  j = TinyLlama();
  j["partial_rotary_factor"] = 0.5;
  EXPECT_EQ(ErrorOf(j),
            "ckpt/config.json: \"partial_rotary_factor\" 0.5 is not supported; supported: 1.0 "
            "(these models rotate the whole head)");
  j = TinyLlama();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"partial_rotary_factor", 0.25}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("rope_scaling: \"partial_rotary_factor\" 0.25"));
  j = TinyLlama();
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}},
                          {"sliding_attention", {{"rope_type", "default"}}}};
  EXPECT_EQ(ErrorOf(j),
            "ckpt/config.json: \"rope_parameters\" is per layer type (full_attention, "
            "sliding_attention); LlamaForCausalLM reads one flat object ({\"rope_type\": ..., "
            "\"rope_theta\": ...})");
  j = TinyLlama();
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0}};
  EXPECT_EQ(ErrorOf(j),
            "ckpt/config.json rope_scaling: \"low_freq_factor\" is required for rope_type "
            "\"llama3\" (a number)");
  j = TinyLlama();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"original_max_position_embeddings", 128}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("\"factor\" is required for rope_type \"yarn\""));
  j = TinyLlama();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", -2.0}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("rope linear factor -2 is not accepted: must be > 0"));
  j = TinyLlama();
  j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 3}, {"group_size", 128}};
  EXPECT_EQ(ErrorOf(j),
            "ckpt/config.json quantization_config: \"bits\" 3 is not supported for quant_method "
            "\"awq\"; accepted: 4");
  j = TinyLlama();
  j["hidden_act"] = "gelu";
  EXPECT_EQ(ErrorOf(j),
            "ckpt/config.json: \"hidden_act\" \"gelu\" is not supported; supported: silu (swish)");
  j = TinyGpt2();
  j["activation_function"] = "relu";
  EXPECT_EQ(ErrorOf(j),
            "ckpt/config.json: \"activation_function\" \"relu\" is not supported; supported: "
            "gelu_new, gelu_pytorch_tanh, gelu_fast");
  j = TinyGpt2();
  j["scale_attn_weights"] = false;
  EXPECT_THAT(ErrorOf(j), HasSubstr("\"scale_attn_weights\" false is not supported"));
  j = TinyGpt2();
  j["scale_attn_by_inverse_layer_idx"] = true;
  EXPECT_THAT(ErrorOf(j),
              HasSubstr("\"scale_attn_by_inverse_layer_idx\" true is not supported; supported: "
                        "false"));
  j = Tiny("Qwen3ForCausalLM");
  j["layer_types"] = {"full_attention", "chunked_attention"};
  EXPECT_EQ(ErrorOf(j),
            "ckpt/config.json: \"layer_types\"[1] \"chunked_attention\" is not supported; "
            "supported: full_attention, sliding_attention");
  j = Tiny("Qwen2ForCausalLM");
  j["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_THAT(ErrorOf(j), HasSubstr("\"layer_types\"[1] is \"sliding_attention\" but there is no "
                                    "window (use_sliding_window absent"));
  j = Tiny("Qwen3ForCausalLM");
  j["head_dim"] = nullptr;
  EXPECT_THAT(ErrorOf(j), HasSubstr("\"head_dim\" is null; Qwen3ForCausalLM needs an integer"));
  j = Tiny("MistralForCausalLM");
  j["sliding_window"] = 0;
  EXPECT_THAT(ErrorOf(j), HasSubstr("\"sliding_window\" is 0, expected a positive number"));
  j = Tiny("FalconForCausalLM");
  EXPECT_EQ(ErrorOf(j),
            "Unsupported architecture \"FalconForCausalLM\" in ckpt/config.json: supported are "
            "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
            "GPT2LMHeadModel");
  j = TinyLlama();
  j.erase("intermediate_size");
  EXPECT_THAT(ErrorOf(j), HasSubstr("ckpt/config.json: \"intermediate_size\" is required"));
}

// A per-layer-type rope object (Qwen2 / Qwen3 have layer_types): one RoPE when the layer types in
// use agree, refused when they differ or one has no entry.
TEST(HfConfigTest, PerLayerTypeRopeForQwen) {
  json j = Tiny("Qwen2ForCausalLM");
  j.erase("rope_theta");
  j["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1e6}}},
      {"sliding_attention", {{"rope_type", "default"}}}};
  auto r = Read(j);  // no sliding layers: the full_attention entry
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.rope.type, RopeType::kLinear);
  EXPECT_EQ(r->config.rope.theta, 1e6);
  EXPECT_THAT(r->unread_keys, ElementsAre("rope_parameters.sliding_attention"));
  j["use_sliding_window"] = true;
  j["sliding_window"] = 32;
  j["max_window_layers"] = 1;  // layer 1 slides
  EXPECT_THAT(ErrorOf(j), HasSubstr("\"rope_parameters\" gives full_attention and "
                                    "sliding_attention layers different RoPE"));
  j["rope_parameters"]["sliding_attention"] = j["rope_parameters"]["full_attention"];
  r = Read(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.rope.type, RopeType::kLinear);
  EXPECT_THAT(r->config.attention_windows, ElementsAre(0, 32));
  j["rope_parameters"].erase("sliding_attention");
  EXPECT_THAT(ErrorOf(j), HasSubstr("has no entry for \"sliding_attention\", which layers use"));
}

// Keys the converter does not read come back for the build log; keys with no effect do not.
TEST(HfConfigTest, UnreadKeysAreListed) {
  json j = TinyLlama();
  j["sliding_window"] = 64;             // LlamaForCausalLM has no sliding window
  j["final_logit_softcapping"] = 30.0;  // nor soft-capping
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"finetuned", true}};
  j["attention_dropout"] = 0.1;  // no effect at inference
  j["transformers_version"] = "5.0.0";
  j["use_cache"] = true;
  auto r = Read(j);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(r->unread_keys,
              ElementsAre("final_logit_softcapping", "rope_scaling.finetuned", "sliding_window"));
  json m = Tiny("MistralForCausalLM");
  m["attention_bias"] = true;  // MistralAttention has no biases, whatever the config says
  m["layer_types"] = {"full_attention", "sliding_attention"};
  r = Read(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->config.qkv_bias);
  EXPECT_THAT(r->unread_keys, ElementsAre("attention_bias", "layer_types"));
}

// The field table and the readers agree: every field the table lists for an architecture is read
// (or known to have no effect) when present.
TEST(HfConfigTest, FieldTableMatchesTheReaders) {
  // A value each field may take without being refused.
  const json benign = {{"partial_rotary_factor", 1.0},
                       {"n_inner", nullptr},
                       {"scale_attn_weights", true},
                       {"scale_attn_by_inverse_layer_idx", false},
                       {"activation_function", "gelu_new"},
                       {"hidden_act", "silu"},
                       {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e4}}},
                       {"rope_scaling", nullptr},
                       {"dtype", "float16"},
                       {"torch_dtype", "float16"},
                       {"head_dim", 16},
                       {"attention_bias", false},
                       {"mlp_bias", false},
                       {"sliding_window", 64},
                       {"use_sliding_window", true},
                       {"max_window_layers", 1},
                       {"layer_types", {"full_attention", "sliding_attention"}},
                       {"tie_word_embeddings", false},
                       {"bos_token_id", 1},
                       {"eos_token_id", 2},
                       {"rope_theta", 1e4},
                       {"rms_norm_eps", 1e-6},
                       {"layer_norm_epsilon", 1e-5},
                       {"num_key_value_heads", 2},
                       {"max_position_embeddings", 256}};
  for (Architecture a : {Architecture::kLlama, Architecture::kMistral, Architecture::kQwen2,
                         Architecture::kQwen3, Architecture::kGpt2}) {
    json j = a == Architecture::kGpt2 ? TinyGpt2() : TinyLlama();
    if (a == Architecture::kMistral) j = Tiny("MistralForCausalLM");
    if (a == Architecture::kQwen2) j = Tiny("Qwen2ForCausalLM");
    if (a == Architecture::kQwen3) j = Tiny("Qwen3ForCausalLM");
    SCOPED_TRACE(j["architectures"][0].get<std::string>());
    for (const HfFieldRule& rule : HfFieldRules()) {
      const std::string field(rule.field);
      if ((rule.architectures & ArchitectureBit(a)) == 0 || field == "quantization_config" ||
          j.contains(field)) {
        continue;
      }
      if (rule.use == HfFieldUse::kNoEffect) {
        j[field] = 0;
      } else {
        ASSERT_TRUE(benign.contains(field)) << "no benign value for table field " << field;
        j[field] = benign[field];
      }
    }
    auto r = Read(j);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    // rope_parameters loses to a non-null rope_scaling only; here rope_scaling is null.
    EXPECT_THAT(r->unread_keys, ::testing::IsEmpty());
  }
}

// docs/hf_config.md lists every field of the table.
TEST(HfConfigTest, DocsListEveryTableField) {
  const char* src = std::getenv("INFLIGHT_SOURCE_DIR");
  std::ifstream in(std::filesystem::path(src ? src : INFLIGHT_TEST_SOURCE_DIR) / "docs" /
                   "hf_config.md");
  ASSERT_TRUE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (const HfFieldRule& rule : HfFieldRules()) {
    EXPECT_NE(doc.find("`" + std::string(rule.field) + "`"), std::string::npos) << rule.field;
  }
}

}  // namespace
}  // namespace inflight::model
