#include "model/random_checkpoint.h"
#include "model/hf_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "model/safetensors.h"
#include "unit/model_io/temp_dir.h"

namespace inflight::model {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::vector<float> Fill(std::uint64_t seed, const std::string& name, InitKind init, std::size_t n,
                        unsigned threads) {
  std::vector<float> v(n);
  FillRandomTensor(seed, name, init, 0.02, DType::kFloat32, reinterpret_cast<std::byte*>(v.data()),
                   n, threads);
  return v;
}

TEST(RandomFillTest, DeterministicAndIndependentOfThreads) {
  const std::size_t n = 300001;  // several chunks and a partial one
  const auto a = Fill(7, "w", InitKind::kWeight, n, 1);
  EXPECT_EQ(Fill(7, "w", InitKind::kWeight, n, 4), a);
  EXPECT_NE(Fill(8, "w", InitKind::kWeight, n, 1), a);
  EXPECT_NE(Fill(7, "w2", InitKind::kWeight, n, 1), a);
  // Chunks are not copies of each other.
  EXPECT_NE(std::vector<float>(a.begin(), a.begin() + 100),
            std::vector<float>(a.begin() + 65536, a.begin() + 65636));
}

TEST(RandomFillTest, MomentsMatchTheInitKind) {
  const std::size_t n = 200000;
  auto moments = [](const std::vector<float>& v) {
    double s = 0, s2 = 0;
    for (float x : v) s += x;
    const double mean = s / static_cast<double>(v.size());
    for (float x : v) s2 += (x - mean) * (x - mean);
    return std::pair{mean, std::sqrt(s2 / static_cast<double>(v.size()))};
  };
  auto [wm, ws] = moments(Fill(1, "w", InitKind::kWeight, n, 2));
  EXPECT_NEAR(wm, 0.0, 0.001);
  EXPECT_NEAR(ws, 0.02, 0.0005);
  auto [nm, ns] = moments(Fill(1, "n", InitKind::kNormWeight, n, 2));
  EXPECT_NEAR(nm, 1.0, 0.001);
  EXPECT_NEAR(ns, 0.02, 0.0005);
  auto [bm, bs] = moments(Fill(1, "b", InitKind::kBias, n, 2));
  EXPECT_NEAR(bm, 0.0, 0.0002);
  EXPECT_NEAR(bs, 0.002, 0.0001);
}

TEST(RandomFillTest, Bf16IsTheRoundedFp32Stream) {
  const std::size_t n = 1000;
  const auto f = Fill(3, "x", InitKind::kWeight, n, 1);
  std::vector<std::uint16_t> bf(n);
  FillRandomTensor(3, "x", InitKind::kWeight, 0.02, DType::kBFloat16,
                   reinterpret_cast<std::byte*>(bf.data()), n, 1);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bf[i], FloatToBf16(f[i])) << i;
}

TEST(RandomCheckpointTest, ConfigJsonMapsBackForEveryArchitecture) {
  for (const char* arch : {"llama", "mistral", "qwen2", "qwen3", "gpt2"}) {
    for (ConfigLayout layout : {ConfigLayout::kTransformers4, ConfigLayout::kTransformers5}) {
      SCOPED_TRACE(std::string(arch) + (layout == ConfigLayout::kTransformers5 ? " 5.x" : " 4.x"));
      RandomCheckpointOptions o;
      o.layout = layout;
      o.arch = arch;
      if (o.arch == "gpt2") o.num_kv_heads = o.num_heads;
      o.vocab_size = 77;
      o.max_position_embeddings = 256;
      o.dtype = DType::kBFloat16;
      ASSERT_TRUE(ValidateCheckpointOptions(o).ok());
      auto c = EngineConfigFromHuggingFace(CheckpointConfigJson(o), arch);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      EXPECT_EQ(c->hidden_size, 64);
      EXPECT_EQ(c->num_layers, 2);
      EXPECT_EQ(c->num_attention_heads, 4);
      EXPECT_EQ(c->num_kv_heads, o.arch == "gpt2" ? 4 : 2);
      EXPECT_EQ(c->intermediate_size, 128);
      EXPECT_EQ(c->vocab_size, 77);
      EXPECT_EQ(c->max_position_embeddings, 256);
      EXPECT_EQ(c->dtype, DType::kBFloat16);
      EXPECT_EQ(c->qkv_bias, o.arch == "qwen2" || o.arch == "gpt2");
      EXPECT_EQ(c->tie_word_embeddings, o.arch == "qwen2" || o.arch == "gpt2");
      EXPECT_EQ(c->qk_norm, o.arch == "qwen3");
      EXPECT_TRUE(c->attention_windows.empty());
      EXPECT_EQ(c->rope.type, RopeType::kDefault);
      const auto j = nlohmann::json::parse(CheckpointConfigJson(o));
      const bool v5 = layout == ConfigLayout::kTransformers5;
      EXPECT_EQ(j.contains("dtype"), v5);
      EXPECT_EQ(j.contains("torch_dtype"), !v5);
      if (o.arch != "gpt2") {
        EXPECT_EQ(j.contains("rope_parameters"), v5);
        EXPECT_EQ(j.contains("rope_theta"), !v5);
      }
    }
  }
}

// Elements over the checkpoint's tensors.
std::uint64_t ParameterCount(const RandomCheckpointOptions& o) {
  std::uint64_t params = 0;
  for (const HfTensorSpec& t : CheckpointTensors(o)) {
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= static_cast<std::uint64_t>(d);
    params += n;
  }
  return params;
}

TEST(RandomCheckpointTest, Llama8bPresetHasTheRealShapes) {
  RandomCheckpointOptions o;
  ASSERT_TRUE(ApplyCheckpointPreset("llama-3.1-8b", &o).ok());
  auto c = EngineConfigFromHuggingFace(CheckpointConfigJson(o), "preset");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->rope.type, RopeType::kLlama3);
  EXPECT_EQ(c->rope.theta, 500000.0);
  EXPECT_EQ(c->rope.factor, 8.0);
  EXPECT_EQ(c->rope.original_max_position_embeddings, 8192);
  EXPECT_EQ(ParameterCount(o), 8030261248u);  // Llama 3.1 8B's parameter count
  EXPECT_THAT(ApplyCheckpointPreset("huge", &o).message(), HasSubstr("\"huge\" is not one of"));
}

TEST(RandomCheckpointTest, Llama70bPresetHasTheRealShapes) {
  RandomCheckpointOptions o;
  ASSERT_TRUE(ApplyCheckpointPreset("llama-3.1-70b", &o).ok());
  auto c = EngineConfigFromHuggingFace(CheckpointConfigJson(o), "preset");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_layers, 80);
  EXPECT_EQ(c->hidden_size, 8192);
  EXPECT_EQ(c->num_attention_heads, 64);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->intermediate_size, 28672);
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->rope.type, RopeType::kLlama3);
  EXPECT_EQ(ParameterCount(o), 70553706496u);  // Llama 3.1 70B's parameter count
}

TEST(RandomCheckpointTest, SameOptionsWriteTheSameBytes) {
  TempDir dir;
  RandomCheckpointOptions o;
  o.arch = "qwen2";
  o.seed = 5;
  ASSERT_TRUE(WriteRandomCheckpoint(o, dir / "a").ok());
  ASSERT_TRUE(WriteRandomCheckpoint(o, dir / "b").ok());
  auto read = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(read(dir / "a/model.safetensors"), read(dir / "b/model.safetensors"));
  o.seed = 6;
  ASSERT_TRUE(WriteRandomCheckpoint(o, dir / "c").ok());
  EXPECT_NE(read(dir / "a/model.safetensors"), read(dir / "c/model.safetensors"));
}

TEST(RandomCheckpointTest, ShardsAreBalancedAndIndexed) {
  TempDir dir;
  RandomCheckpointOptions o;
  o.shards = 4;
  auto s = WriteRandomCheckpoint(o, dir.path());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::ifstream in(dir / "model.safetensors.index.json");
  const auto index = nlohmann::json::parse(in);
  std::map<std::string, int> per_file;
  for (const auto& [name, file] : index["weight_map"].items()) per_file[file.get<std::string>()]++;
  EXPECT_EQ(per_file.size(), 4u);
  std::uint64_t total = 0;
  for (const auto& [file, count] : per_file) {
    auto f = SafetensorsFile::Open(dir / file);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(static_cast<int>((*f)->num_tensors()), count);
    for (const std::string& n : (*f)->names()) total += (*f)->Find(n)->nbytes;
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<std::uint64_t>(), total);
  EXPECT_EQ(static_cast<std::int64_t>(index["weight_map"].size()), s->num_tensors);
}

TEST(RandomCheckpointTest, TokenizerFilesGiveVocabAndSpecialIds) {
  TempDir dir;
  // A GPT-2-like tokenizer: tokenizer_config.json names no special token; <|endoftext|> is the last
  // id.
  dir.WriteFile("tok/vocab.json", R"({"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3})");
  dir.WriteFile("tok/merges.txt", "#version: 0.2\na b\n");
  dir.WriteFile("tok/tokenizer_config.json", R"({"model_max_length": 1024})");
  auto info = ReadTokenizerInfo(dir / "tok");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->vocab_size, 4);
  EXPECT_EQ(info->bos_token_id, 3);
  EXPECT_EQ(info->eos_token_id, 3);
  EXPECT_EQ(info->files.size(), 3u);

  RandomCheckpointOptions o;
  o.arch = "gpt2";
  o.num_kv_heads = o.num_heads;
  o.tokenizer_dir = dir / "tok";
  auto s = WriteRandomCheckpoint(o, dir / "ckpt");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->vocab_size, 4);
  EXPECT_TRUE(std::filesystem::exists(dir / "ckpt/merges.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir / "ckpt/tokenizer_config.json"));
  std::ifstream in(dir / "ckpt/config.json");
  const auto config = nlohmann::json::parse(in);
  EXPECT_EQ(config["vocab_size"], 4);
  EXPECT_EQ(config["eos_token_id"], 3);

  // tokenizer.json with added tokens and a tokenizer_config naming them (the Llama 3 layout).
  dir.WriteFile("tok2/tokenizer.json",
                R"({"model": {"vocab": {"x": 0, "y": 1}}, "added_tokens": [)"
                R"({"id": 10, "content": "<s>"}, {"id": 11, "content": "</s>"}]})");
  dir.WriteFile("tok2/tokenizer_config.json",
                R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}})");
  auto info2 = ReadTokenizerInfo(dir / "tok2");
  ASSERT_TRUE(info2.ok()) << info2.status().ToString();
  EXPECT_EQ(info2->vocab_size, 12);
  EXPECT_EQ(info2->bos_token_id, 10);
  EXPECT_EQ(info2->eos_token_id, 11);

  EXPECT_EQ(ReadTokenizerInfo(dir / "nope").status().code(), StatusCode::kNotFound);
}

TEST(RandomCheckpointTest, BadOptionsAreNamed) {
  RandomCheckpointOptions o;
  o.arch = "bert";
  EXPECT_THAT(ValidateCheckpointOptions(o).message(), HasSubstr("--arch \"bert\""));
  o = {};
  o.num_heads = 3;
  EXPECT_THAT(ValidateCheckpointOptions(o).message(), HasSubstr("--num_heads 3"));
  o = {};
  o.arch = "gpt2";  // num_kv_heads 2 != num_heads 4
  EXPECT_THAT(ValidateCheckpointOptions(o).message(), HasSubstr("gpt2"));
  o = {};
  o.arch = "gpt2";
  o.num_kv_heads = o.num_heads;
  o.rope.type = RopeType::kLinear;
  EXPECT_THAT(ValidateCheckpointOptions(o).message(), HasSubstr("rope_scaling"));
  o = {};
  o.rope.type = RopeType::kLlama3;
  o.rope.factor = 8.0;
  o.rope.high_freq_factor = 0.5;
  EXPECT_THAT(ValidateCheckpointOptions(o).message(), HasSubstr("high_freq_factor 0.5"));
  o = {};
  o.sliding_window = 16;  // llama has none
  EXPECT_THAT(ValidateCheckpointOptions(o).message(), HasSubstr("--sliding_window"));
  o = {};
  o.arch = "qwen2";
  o.mlp_bias = true;
  EXPECT_THAT(ValidateCheckpointOptions(o).message(), HasSubstr("--mlp_bias"));
}

}  // namespace
}  // namespace inflight::model
