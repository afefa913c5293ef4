// Engines whose weights are made at load (inflight-build --random_preset P --weights_at_load):
// config.json alone on disk, and each rank's OpenRankWeights gives the bytes of the rank file that
// the same build writes without the switch; the CPU runner serves such an engine.
#include "model/rank_weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "model/model_runner.h"
#include "model/random_engine.h"
#include "unit/model_io/temp_dir.h"

namespace inflight::model {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

RandomCheckpointOptions TinyPreset(std::uint64_t seed) {
  RandomCheckpointOptions o;
  EXPECT_TRUE(ApplyCheckpointPreset("tiny", &o).ok());
  o.seed = seed;
  o.max_position_embeddings = 96;
  return o;
}

BuildOptions Build(const std::string& dir, std::int32_t tp, std::int32_t pp) {
  BuildOptions b;
  b.output_dir = dir;
  b.tp_size = tp;
  b.pp_size = pp;
  b.max_seq_len = 96;
  b.max_input_len = 64;
  return b;
}

// Every tensor of `a` in `b` with the same dtype, shape and bytes, and no other.
void ExpectSameTensors(const SafetensorsFile& a, const SafetensorsFile& b,
                       const std::string& what) {
  ASSERT_EQ(a.names(), b.names()) << what;
  for (const std::string& name : a.names()) {
    const TensorInfo* x = a.Find(name);
    const TensorInfo* y = b.Find(name);
    ASSERT_NE(y, nullptr) << what << " " << name;
    EXPECT_EQ(x->dtype, y->dtype) << what << " " << name;
    EXPECT_EQ(x->shape, y->shape) << what << " " << name;
    ASSERT_EQ(x->nbytes, y->nbytes) << what << " " << name;
    EXPECT_EQ(std::memcmp(x->data, y->data, x->nbytes), 0) << what << " " << name << " differs";
  }
}

struct Layout {
  std::int32_t tp, pp;
  std::optional<QuantAlgo> qformat;
};

class RankWeightsTest : public ::testing::TestWithParam<Layout> {};

TEST_P(RankWeightsTest, AtLoadEqualsTheRankFiles) {
  const Layout l = GetParam();
  TempDir dir;
  const RandomCheckpointOptions o = TinyPreset(11);
  BuildOptions files = Build(dir / "files", l.tp, l.pp);
  files.qformat = l.qformat;
  ASSERT_TRUE(WriteRandomEngine(o, files).ok());
  BuildOptions at_load = Build(dir / "at_load", l.tp, l.pp);
  at_load.qformat = l.qformat;
  auto summary = WriteRandomEngine(o, at_load, nullptr, RandomWeightsRecipe{"tiny", 11});
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_GT(summary->num_bytes, 0u);

  // config.json alone, recording the recipe.
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir / "at_load"))
    entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"config.json"});
  auto config = LoadEngineConfig(dir / "at_load");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_TRUE(config->random_weights.has_value());
  EXPECT_EQ(config->random_weights->preset, "tiny");
  EXPECT_EQ(config->random_weights->seed, 11u);

  for (std::int32_t pp = 0; pp < l.pp; ++pp) {
    for (std::int32_t tp = 0; tp < l.tp; ++tp) {
      auto shard = MakeModelShard(*config, tp, l.tp, pp, l.pp);
      ASSERT_TRUE(shard.ok()) << shard.status().ToString();
      auto made = OpenRankWeights(dir / "at_load", *config, *shard);
      ASSERT_TRUE(made.ok()) << made.status().ToString();
      auto written = SafetensorsFile::Open(dir / ("files/" + shard->file_name()));
      ASSERT_TRUE(written.ok()) << written.status().ToString();
      ExpectSameTensors(**written, **made, shard->file_name());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, RankWeightsTest,
                         ::testing::Values(Layout{1, 1, std::nullopt}, Layout{2, 1, std::nullopt},
                                           Layout{1, 2, std::nullopt},
                                           Layout{2, 1, QuantAlgo::kFp8}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           const Layout& l = info.param;
                           return "tp" + std::to_string(l.tp) + "_pp" + std::to_string(l.pp) +
                                  (l.qformat ? "_" + std::string(QuantAlgoName(*l.qformat)) : "");
                         });

TEST(RankWeightsTest, TheCpuRunnerGivesTheSameLogitsFromAnEngineMadeAtLoad) {
  TempDir dir;
  const RandomCheckpointOptions o = TinyPreset(3);
  ASSERT_TRUE(WriteRandomEngine(o, Build(dir / "files", 1, 1)).ok());
  ASSERT_TRUE(
      WriteRandomEngine(o, Build(dir / "at_load", 1, 1), nullptr, RandomWeightsRecipe{"tiny", 3})
          .ok());
  RunnerOptions options;
  options.max_kv_tokens = 256;
  options.num_threads = 2;
  std::vector<std::vector<float>> logits;
  for (const std::string name : {"files", "at_load"}) {
    auto runner = CreateCpuModelRunner(dir / name, options);
    ASSERT_TRUE(runner.ok()) << name << ": " << runner.status().ToString();
    StepInput in;
    SequenceStep s;
    s.tokens = {5, 17, 2, 901, 44, 3};
    s.num_cached = 0;
    s.block_table = {0};
    s.logits = SequenceStep::Logits::kAll;
    in.sequences.push_back(s);
    auto out = (*runner)->Step(in);
    ASSERT_TRUE(out.ok()) << name << ": " << out.status().ToString();
    ASSERT_EQ(out->logits.size(), 6u * 1000u) << name;
    logits.push_back(out->logits);
  }
  EXPECT_EQ(logits[0], logits[1]);
}

TEST(RankWeightsTest, ARecipeThatCannotGiveTheOptionsBackIsRefused) {
  TempDir dir;
  RandomCheckpointOptions o = TinyPreset(1);
  o.num_layers = 3;  // not the preset's: the recipe would make other weights
  auto st = WriteRandomEngine(o, Build(dir / "e", 1, 1), nullptr, RandomWeightsRecipe{"tiny", 1});
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.status().message(), HasSubstr("--weights_at_load"));
}

TEST(RankWeightsTest, AnUnknownPresetFailsAtLoadNamingIt) {
  TempDir dir;
  ASSERT_TRUE(WriteRandomEngine(TinyPreset(1), Build(dir / "e", 1, 1), nullptr,
                                RandomWeightsRecipe{"tiny", 1})
                  .ok());
  auto config = LoadEngineConfig(dir / "e");
  ASSERT_TRUE(config.ok());
  config->random_weights->preset = "huge";
  auto shard = MakeModelShard(*config, 0, 1, 0, 1);
  ASSERT_TRUE(shard.ok());
  auto made = OpenRankWeights(dir / "e", *config, *shard);
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.status().message(), HasSubstr("huge"));
}

TEST(PickScratchDirTest, PrefersADirectoryWithRoomForEveryRankOfTheHost) {
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
  const std::uint64_t rank_bytes = 70 * kGiB;
  // Two 70 GiB ranks on one host: /dev/shm holds one of them, /tmp both.
  const std::vector<ScratchCandidate> dirs = {{"/dev/shm", 128 * kGiB}, {"/tmp", 400 * kGiB}};
  EXPECT_EQ(PickScratchDir(dirs, rank_bytes, 2), "/tmp");
  EXPECT_EQ(PickScratchDir(dirs, rank_bytes, 1), "/dev/shm");
  EXPECT_EQ(PickScratchDir(dirs, rank_bytes, 0), "/dev/shm");  // no launcher count: one
}

TEST(PickScratchDirTest, FallsBackToRoomForThisRankAlone) {
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
  // Nothing holds four ranks' 35 GiB at once: the first with room for one (and 1 GiB) is taken.
  const std::vector<ScratchCandidate> dirs = {
      {"/dev/shm", 30 * kGiB}, {"/scratch", 100 * kGiB}, {"/tmp", 120 * kGiB}};
  EXPECT_EQ(PickScratchDir(dirs, 35 * kGiB, 4), "/scratch");
  EXPECT_EQ(PickScratchDir(dirs, 100 * kGiB, 4), "/tmp");  // 100 + 1 GiB: more than /scratch has
  EXPECT_EQ(PickScratchDir(dirs, 120 * kGiB, 1), "");
  EXPECT_EQ(PickScratchDir({}, 1, 1), "");
}

}  // namespace
}  // namespace inflight::model
