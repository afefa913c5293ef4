// engine_dir as an engine or a Hugging Face folder: what is accepted, the cache key, the cache and
// the temporary engine.
#include "model/engine_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model/random_checkpoint.h"
#include "unit/model_io/temp_dir.h"

namespace inflight::model {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
namespace fs = std::filesystem;

RandomCheckpointOptions Tiny() {
  RandomCheckpointOptions o;
  EXPECT_TRUE(ApplyCheckpointPreset("tiny", &o).ok());
  o.vocab_size = 50;
  o.max_position_embeddings = 64;
  o.layout = ConfigLayout::kTransformers5;
  return o;
}

TEST(EngineSourceTest, ClassifiesEnginesCheckpointsAndNeither) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(Tiny(), dir / "ckpt").ok());
  EXPECT_EQ(ClassifyEngineDir(dir / "ckpt").value(), EngineDirKind::kHuggingFace);
  BuildOptions b;
  b.checkpoint_dir = dir / "ckpt";
  b.output_dir = dir / "engine";
  ASSERT_TRUE(BuildEngine(b).ok());
  EXPECT_EQ(ClassifyEngineDir(dir / "engine").value(), EngineDirKind::kEngine);

  auto missing = ClassifyEngineDir(dir / "nowhere");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir / "nowhere"));
  fs::create_directories(dir / "empty");
  EXPECT_THAT(ClassifyEngineDir(dir / "empty").status().message(),
              HasSubstr("config.json not found; engine_dir must name an engine directory"));
  fs::create_directories(dir / "weightless");
  fs::copy_file(dir / "ckpt/config.json", dir / "weightless/config.json");
  EXPECT_THAT(ClassifyEngineDir(dir / "weightless").status().message(),
              HasSubstr("without weights: no *.safetensors files"));
  fs::create_directories(dir / "other");
  std::ofstream(dir / "other/config.json") << R"({"format": "gguf"})";
  EXPECT_THAT(ClassifyEngineDir(dir / "other").status().message(),
              HasSubstr("\"format\" is \"gguf\""));
}

// One changed byte of the weights, of config.json, or one build option: another key.
TEST(EngineSourceTest, CacheKeyFollowsEveryByteAndOption) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(Tiny(), dir / "a").ok());
  fs::copy(dir / "a", dir / "b");
  BuildOptions o;
  const std::string key = EngineCacheKey(dir / "a", o).value();
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(EngineCacheKey(dir / "b", o).value(), key);  // same bytes, another folder
  {
    std::fstream f(dir / "b/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);  // a weight byte near the end
    f.put('\x7f');
  }
  const std::string weights_changed = EngineCacheKey(dir / "b", o).value();
  EXPECT_NE(weights_changed, key);
  o.max_seq_len = 32;
  EXPECT_NE(EngineCacheKey(dir / "a", o).value(), key);
  o = {};
  o.dtype = DType::kFloat16;
  EXPECT_NE(EngineCacheKey(dir / "a", o).value(), key);
}

TEST(EngineSourceTest, CachesUnderTheKeyAndReusesIt) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(Tiny(), dir / "ckpt").ok());
  EngineLoadOptions o;
  o.cache_dir = dir / "cache";
  auto first = PrepareEngineDir(dir / "ckpt", o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE((*first)->converted());
  EXPECT_FALSE((*first)->from_cache());
  const std::string key = EngineCacheKey(dir / "ckpt", o.build).value();
  EXPECT_EQ((*first)->dir(), dir / ("cache/ckpt-" + key));
  EXPECT_TRUE(LoadEngineConfig((*first)->dir()).ok());
  EXPECT_TRUE(fs::exists(fs::path((*first)->dir()) / "source.json"));
  auto second = PrepareEngineDir(dir / "ckpt", o);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE((*second)->from_cache());
  EXPECT_EQ((*second)->dir(), (*first)->dir());
  first->reset();  // a cached engine stays when its PreparedEngine goes
  EXPECT_TRUE(fs::exists(fs::path((*second)->dir()) / "config.json"));
  // Nothing half-built is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "cache"), fs::directory_iterator()), 1);
}

TEST(EngineSourceTest, WithoutACacheTheEngineIsTemporary) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(Tiny(), dir / "ckpt").ok());
  auto engine = PrepareEngineDir(dir / "ckpt", EngineLoadOptions{});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const std::string path = (*engine)->dir();
  EXPECT_TRUE(LoadEngineConfig(path).ok());
  engine->reset();
  EXPECT_FALSE(fs::exists(path));

  // An engine is used where it is.
  BuildOptions b;
  b.checkpoint_dir = dir / "ckpt";
  b.output_dir = dir / "engine";
  ASSERT_TRUE(BuildEngine(b).ok());
  auto as_is = PrepareEngineDir(dir / "engine", EngineLoadOptions{});
  ASSERT_TRUE(as_is.ok());
  EXPECT_EQ((*as_is)->dir(), dir / "engine");
  EXPECT_FALSE((*as_is)->converted());
  as_is->reset();
  EXPECT_TRUE(fs::exists(dir / "engine/config.json"));
}

TEST(EngineSourceTest, ARefusedCheckpointLeavesNoEngine) {
  TempDir dir;
  RandomCheckpointOptions o = Tiny();
  ASSERT_TRUE(WriteRandomCheckpoint(o, dir / "ckpt").ok());
  std::ofstream(dir / "ckpt/config.json") << R"({"architectures": ["LlamaForCausalLM"],
      "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
      "vocab_size": 50, "quantization_config": {"quant_method": "gptq", "bits": 3, "group_size": 128},
      "dtype": "float32"})";
  EngineLoadOptions load;
  load.cache_dir = dir / "cache";
  auto r = PrepareEngineDir(dir / "ckpt", load);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(r.status().message(),
              HasSubstr("\"bits\" 3 is not supported for quant_method \"gptq\"; accepted: 4, 8"));
  EXPECT_FALSE(fs::exists(dir / "cache") && !fs::is_empty(dir / "cache"));
}

}  // namespace
}  // namespace inflight::model
