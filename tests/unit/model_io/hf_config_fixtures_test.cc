// Every config.json under hf_configs/ (written from what transformers writes, 4.x and 5.x layouts)
// maps to the engine config asserted here, field by field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/hf_config.h"

namespace inflight::model {
namespace {

std::filesystem::path FixtureDir() {
  const char* src = std::getenv("INFLIGHT_SOURCE_DIR");
  return std::filesystem::path(src ? src : INFLIGHT_TEST_SOURCE_DIR) / "tests" / "unit" /
         "model_io" / "hf_configs";
}

std::string ReadFixture(const std::string& name) {
  std::ifstream in(FixtureDir() / name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Expected {
  const char* file;
  Architecture architecture;
  std::optional<DType> dtype;  // config_dtype
  struct {
    std::int64_t vocab, hidden, layers, heads, kv_heads, head_dim, intermediate, positions;
  } dims;
  float norm_eps;
  RopeConfig rope;  // position_embedding kRope only
  bool qkv_bias = false, attn_out_bias = false, mlp_bias = false, tied = false, qk_norm = false;
  std::vector<std::int64_t> windows = {};  // as config.json sets them, before a max_seq_len
  std::optional<std::int32_t> bos = std::nullopt, eos = std::nullopt;
};

RopeConfig Rope(RopeType type, double theta, double factor = 1.0, std::int64_t original = 0,
                double attention_factor = 1.0) {
  RopeConfig r;
  r.type = type;
  r.theta = theta;
  r.factor = factor;
  r.original_max_position_embeddings = original;
  r.attention_factor = attention_factor;
  return r;
}

RopeConfig Llama3Rope() {
  RopeConfig r = Rope(RopeType::kLlama3, 500000.0, 8.0, 8192);
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  return r;
}

std::vector<std::int64_t> Windows(std::int64_t full, std::int64_t sliding, std::int64_t window) {
  std::vector<std::int64_t> w(static_cast<std::size_t>(full), 0);
  w.resize(static_cast<std::size_t>(full + sliding), window);
  return w;
}

// Qwen2.5's yarn: factor 4 → attention factor 0.1 ln 4 + 1.
constexpr double kQwenYarnAttention = 1.1386294361119891;

const Expected kFixtures[] = {
    {.file = "llama31_8b_instruct.v4.json",
     .architecture = Architecture::kLlama,
     .dtype = DType::kBFloat16,
     .dims = {128256, 4096, 32, 32, 8, 128, 14336, 131072},
     .norm_eps = 1e-5f,
     .rope = Llama3Rope(),
     .bos = 128000,
     .eos = 128001},
    {.file = "llama31_8b.v5.json",
     .architecture = Architecture::kLlama,
     .dtype = DType::kBFloat16,
     .dims = {128256, 4096, 32, 32, 8, 128, 14336, 131072},
     .norm_eps = 1e-5f,
     .rope = Llama3Rope(),
     .bos = 128000,
     .eos = 128001},
    {.file = "llama2_7b.v4.json",
     .architecture = Architecture::kLlama,
     .dtype = DType::kFloat16,
     .dims = {32000, 4096, 32, 32, 32, 128, 11008, 4096},
     .norm_eps = 1e-5f,
     .rope = Rope(RopeType::kDefault, 10000.0),
     .bos = 1,
     .eos = 2},
    {.file = "llama_tiny_default.v5.json",
     .architecture = Architecture::kLlama,
     .dtype = DType::kFloat32,
     .dims = {1000, 64, 2, 4, 2, 16, 128, 2048},
     .norm_eps = 1e-6f,
     .rope = Rope(RopeType::kDefault, 10000.0),
     .qkv_bias = true,
     .attn_out_bias = true,
     .mlp_bias = true,
     .tied = true,
     .bos = 1,
     .eos = 2},
    {.file = "llama2_linear_16k.v4.json",
     .architecture = Architecture::kLlama,
     .dtype = DType::kFloat16,
     .dims = {32000, 4096, 32, 32, 32, 128, 11008, 4096},
     .norm_eps = 1e-5f,
     .rope = Rope(RopeType::kLinear, 10000.0, 4.0),
     .bos = 1,
     .eos = 2},
    {.file = "llama_linear.v5.json",
     .architecture = Architecture::kLlama,
     .dtype = DType::kFloat16,
     .dims = {32000, 4096, 32, 32, 32, 128, 11008, 16384},
     .norm_eps = 1e-5f,
     .rope = Rope(RopeType::kLinear, 10000.0, 4.0),
     .bos = 1,
     .eos = 2},
    // dynamic: theta grows past max_position_embeddings.
    {.file = "llama2_dynamic.v4.json",
     .architecture = Architecture::kLlama,
     .dtype = DType::kFloat16,
     .dims = {32000, 4096, 32, 32, 32, 128, 11008, 4096},
     .norm_eps = 1e-5f,
     .rope = Rope(RopeType::kDynamic, 10000.0, 2.0, 4096),
     .bos = 1,
     .eos = 2},
    {.file = "llama_dynamic.v5.json",
     .architecture = Architecture::kLlama,
     .dtype = DType::kBFloat16,
     .dims = {32000, 4096, 32, 32, 32, 128, 11008, 4096},
     .norm_eps = 1e-5f,
     .rope = Rope(RopeType::kDynamic, 10000.0, 2.0, 4096),
     .bos = 1,
     .eos = 2},
    {.file = "qwen25_7b_instruct_yarn.v4.json",
     .architecture = Architecture::kQwen2,
     .dtype = DType::kBFloat16,
     .dims = {152064, 3584, 28, 28, 4, 128, 18944, 32768},
     .norm_eps = 1e-6f,
     .rope = Rope(RopeType::kYarn, 1000000.0, 4.0, 32768, kQwenYarnAttention),
     .qkv_bias = true,
     .bos = 151643,
     .eos = 151645},
    {.file = "qwen25_7b_instruct_yarn.v5.json",
     .architecture = Architecture::kQwen2,
     .dtype = DType::kBFloat16,
     .dims = {152064, 3584, 28, 28, 4, 128, 18944, 32768},
     .norm_eps = 1e-6f,
     .rope = Rope(RopeType::kYarn, 1000000.0, 4.0, 32768, kQwenYarnAttention),
     .qkv_bias = true,
     .bos = 151643,
     .eos = 151645},
    // sliding_window 32768 is not used: use_sliding_window is false.
    {.file = "qwen25_05b.v4.json",
     .architecture = Architecture::kQwen2,
     .dtype = DType::kBFloat16,
     .dims = {151936, 896, 24, 14, 2, 64, 4864, 32768},
     .norm_eps = 1e-6f,
     .rope = Rope(RopeType::kDefault, 1000000.0),
     .qkv_bias = true,
     .tied = true,
     .bos = 151643,
     .eos = 151643},
    // layer_types: the last 4 layers slide over 4096 keys.
    {.file = "qwen2_sliding_window.v5.json",
     .architecture = Architecture::kQwen2,
     .dtype = DType::kBFloat16,
     .dims = {151936, 896, 24, 14, 2, 64, 4864, 32768},
     .norm_eps = 1e-6f,
     .rope = Rope(RopeType::kDefault, 1000000.0),
     .qkv_bias = true,
     .tied = true,
     .windows = Windows(20, 4, 4096),
     .bos = 151643,
     .eos = 151643},
    {.file = "qwen3_8b.v4.json",
     .architecture = Architecture::kQwen3,
     .dtype = DType::kBFloat16,
     .dims = {151936, 4096, 36, 32, 8, 128, 12288, 40960},
     .norm_eps = 1e-6f,
     .rope = Rope(RopeType::kDefault, 1000000.0),
     .qk_norm = true,
     .bos = 151643,
     .eos = 151645},
    {.file = "qwen3_8b.v5.json",
     .architecture = Architecture::kQwen3,
     .dtype = DType::kBFloat16,
     .dims = {151936, 4096, 36, 32, 8, 128, 12288, 40960},
     .norm_eps = 1e-6f,
     .rope = Rope(RopeType::kDefault, 1000000.0),
     .qk_norm = true,
     .bos = 151643,
     .eos = 151645},
    {.file = "mistral_7b_v01.v4.json",
     .architecture = Architecture::kMistral,
     .dtype = DType::kBFloat16,
     .dims = {32000, 4096, 32, 32, 8, 128, 14336, 32768},
     .norm_eps = 1e-5f,
     .rope = Rope(RopeType::kDefault, 10000.0),
     .windows = Windows(0, 32, 4096),
     .bos = 1,
     .eos = 2},
    {.file = "mistral_7b_v01.v5.json",
     .architecture = Architecture::kMistral,
     .dtype = DType::kBFloat16,
     .dims = {32000, 4096, 32, 32, 8, 128, 14336, 32768},
     .norm_eps = 1e-5f,
     .rope = Rope(RopeType::kDefault, 10000.0),
     .windows = Windows(0, 32, 4096),
     .bos = 1,
     .eos = 2},
    {.file = "mistral_7b_instruct_v03.v4.json",
     .architecture = Architecture::kMistral,
     .dtype = DType::kBFloat16,
     .dims = {32768, 4096, 32, 32, 8, 128, 14336, 32768},
     .norm_eps = 1e-5f,
     .rope = Rope(RopeType::kDefault, 1000000.0),
     .bos = 1,
     .eos = 2},
    // No torch_dtype in GPT-2's original config: the builder takes the weights' dtype.
    {.file = "gpt2.v4.json",
     .architecture = Architecture::kGpt2,
     .dtype = std::nullopt,
     .dims = {50257, 768, 12, 12, 12, 64, 3072, 1024},
     .norm_eps = 1e-5f,
     .rope = RopeConfig{},
     .qkv_bias = true,
     .attn_out_bias = true,
     .mlp_bias = true,
     .tied = true,
     .bos = 50256,
     .eos = 50256},
    {.file = "gpt2.v5.json",
     .architecture = Architecture::kGpt2,
     .dtype = DType::kFloat32,
     .dims = {50257, 768, 12, 12, 12, 64, 3072, 1024},
     .norm_eps = 1e-5f,
     .rope = RopeConfig{},
     .qkv_bias = true,
     .attn_out_bias = true,
     .mlp_bias = true,
     .tied = true,
     .bos = 50256,
     .eos = 50256},
};

class HfConfigFixtureTest : public ::testing::TestWithParam<Expected> {};

TEST_P(HfConfigFixtureTest, YieldsTheEngineConfig) {
  const Expected& e = GetParam();
  const std::string text = ReadFixture(e.file);
  ASSERT_FALSE(text.empty()) << "missing fixture " << (FixtureDir() / e.file);
  auto r = ReadHuggingFaceConfig(text, e.file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const EngineConfig& c = r->config;
  EXPECT_EQ(c.architecture, e.architecture);
  EXPECT_EQ(r->config_dtype, e.dtype);
  EXPECT_EQ(c.vocab_size, e.dims.vocab);
  EXPECT_EQ(c.hidden_size, e.dims.hidden);
  EXPECT_EQ(c.num_layers, e.dims.layers);
  EXPECT_EQ(c.num_attention_heads, e.dims.heads);
  EXPECT_EQ(c.num_kv_heads, e.dims.kv_heads);
  EXPECT_EQ(c.head_dim, e.dims.head_dim);
  EXPECT_EQ(c.intermediate_size, e.dims.intermediate);
  EXPECT_EQ(c.max_position_embeddings, e.dims.positions);
  EXPECT_EQ(c.norm_eps, e.norm_eps);
  const bool gpt2 = e.architecture == Architecture::kGpt2;
  EXPECT_EQ(c.norm, gpt2 ? NormKind::kLayerNorm : NormKind::kRmsNorm);
  EXPECT_EQ(c.activation, gpt2 ? Activation::kGeluNew : Activation::kSwiGlu);
  EXPECT_EQ(c.position_embedding, gpt2 ? PositionEmbedding::kLearned : PositionEmbedding::kRope);
  if (!gpt2) {
    EXPECT_EQ(c.rope.type, e.rope.type);
    EXPECT_EQ(c.rope.theta, e.rope.theta);
    EXPECT_EQ(c.rope.factor, e.rope.factor);
    EXPECT_EQ(c.rope.original_max_position_embeddings, e.rope.original_max_position_embeddings);
    EXPECT_EQ(c.rope.low_freq_factor, e.rope.low_freq_factor);
    EXPECT_EQ(c.rope.high_freq_factor, e.rope.high_freq_factor);
    EXPECT_EQ(c.rope.beta_fast, 32.0);
    EXPECT_EQ(c.rope.beta_slow, 1.0);
    EXPECT_TRUE(c.rope.truncate);
    EXPECT_DOUBLE_EQ(c.rope.attention_factor, e.rope.attention_factor);
  }
  EXPECT_EQ(c.qkv_bias, e.qkv_bias);
  EXPECT_EQ(c.attn_out_bias, e.attn_out_bias);
  EXPECT_EQ(c.mlp_bias, e.mlp_bias);
  EXPECT_EQ(c.norm_bias, gpt2);
  EXPECT_EQ(c.tie_word_embeddings, e.tied);
  EXPECT_EQ(c.qk_norm, e.qk_norm);
  EXPECT_EQ(c.attention_windows, e.windows);
  EXPECT_EQ(c.bos_token_id, e.bos);
  EXPECT_EQ(c.eos_token_id, e.eos);
  // Every key of these files is read or known to have no effect.
  EXPECT_THAT(r->unread_keys, ::testing::IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfConfigFixtureTest, ::testing::ValuesIn(kFixtures),
                         [](const ::testing::TestParamInfo<Expected>& info) {
                           std::string name = info.param.file;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// The 4.x and 5.x files of one model give the same engine config.
TEST(HfConfigFixtureLayouts, BothLayoutsOfAModelAgree) {
  const std::pair<const char*, const char*> pairs[] = {
      {"llama31_8b_instruct.v4.json", "llama31_8b.v5.json"},
      {"qwen25_7b_instruct_yarn.v4.json", "qwen25_7b_instruct_yarn.v5.json"},
      {"qwen3_8b.v4.json", "qwen3_8b.v5.json"},
      {"mistral_7b_v01.v4.json", "mistral_7b_v01.v5.json"}};
  for (const auto& [v4, v5] : pairs) {
    SCOPED_TRACE(v4);
    auto a = EngineConfigFromHuggingFace(ReadFixture(v4), v4);
    auto b = EngineConfigFromHuggingFace(ReadFixture(v5), v5);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
    EXPECT_EQ(EngineConfigToJson(*a), EngineConfigToJson(*b));
  }
}

}  // namespace
}  // namespace inflight::model
