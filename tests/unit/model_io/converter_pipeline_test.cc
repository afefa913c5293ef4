// The builder's pipeline stages (--pp_size): each rank file holds its stage's layers and the
// embeddings or the head that stage runs, byte for byte the tensors of the same tp rank of an
// engine built without stages; more stages than layers is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/checkpoint_converter.h"
#include "model/random_checkpoint.h"
#include "model/safetensors.h"
#include "unit/model_io/temp_dir.h"

namespace inflight::model {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

RandomCheckpointOptions Tiny(const std::string& arch) {
  RandomCheckpointOptions o;
  EXPECT_TRUE(ApplyCheckpointPreset("tiny", &o).ok());  // 2 layers
  o.arch = arch;
  if (arch == "gpt2") o.num_kv_heads = o.num_heads;
  o.vocab_size = 50;
  o.max_position_embeddings = 64;
  o.seed = 11;
  return o;
}

Result<BuildSummary> Build(const std::string& ckpt, const std::string& out, int tp, int pp) {
  BuildOptions b;
  b.checkpoint_dir = ckpt;
  b.output_dir = out;
  b.tp_size = tp;
  b.pp_size = pp;
  return BuildEngine(b);
}

std::unique_ptr<SafetensorsFile> Open(const std::string& path) {
  auto f = SafetensorsFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(*f) : nullptr;
}

// tp 2 x pp 2 of a 2-layer model: rank<pp * 2 + tp> holds tp rank tp's tensors of stage pp's one
// layer, embed on the first stage, final_norm and lm_head (or embed, when tied) on the last.
TEST(ConverterPipelineTest, StagesHoldTheirLayers) {
  for (const bool tied : {false, true}) {
    TempDir dir;
    RandomCheckpointOptions o = Tiny("llama");
    o.tie_word_embeddings = tied;
    ASSERT_TRUE(WriteRandomCheckpoint(o, dir / "ckpt").ok());
    ASSERT_TRUE(Build(dir / "ckpt", dir / "tp2", 2, 1).ok());
    auto built = Build(dir / "ckpt", dir / "tp2pp2", 2, 2);
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    EXPECT_EQ(built->config.pp_size, 2);
    EXPECT_FALSE(std::filesystem::exists(dir / "tp2pp2/rank4.safetensors"));
    for (int file = 0; file < 4; ++file) {
      const int tp = file % 2, pp = file / 2;
      auto stage = Open(dir / ("tp2pp2/rank" + std::to_string(file) + ".safetensors"));
      auto whole = Open(dir / ("tp2/rank" + std::to_string(tp) + ".safetensors"));
      ASSERT_TRUE(stage != nullptr && whole != nullptr);
      std::vector<std::string> want;
      for (const std::string& n : whole->names()) {
        const bool mine = n.rfind("layers.", 0) == 0
                              ? n.rfind("layers." + std::to_string(pp) + ".", 0) == 0
                          : n == "embed.weight" ? pp == 0 || tied
                                                : pp == 1;
        if (mine) want.push_back(n);
      }
      std::vector<std::string> got = stage->names();
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      EXPECT_EQ(got, want) << "rank file " << file << (tied ? " (tied)" : "");
      for (const std::string& n : want) {
        const TensorInfo *a = stage->Find(n), *b = whole->Find(n);
        ASSERT_TRUE(a != nullptr && b != nullptr) << n;
        ASSERT_EQ(a->shape, b->shape) << n;
        ASSERT_EQ(a->nbytes, b->nbytes) << n;
        EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes), 0) << n << " of rank file " << file;
      }
    }
  }
}

TEST(ConverterPipelineTest, RefusesMoreStagesThanLayers) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomCheckpoint(Tiny("gpt2"), dir / "ckpt").ok());
  auto built = Build(dir / "ckpt", dir / "engine", 1, 3);
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.status().message(), HasSubstr("--pp_size 3 is more than the model's 2 layers"));
}

}  // namespace
}  // namespace inflight::model
