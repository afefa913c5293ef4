#include "model/random_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "unit/model_io/temp_dir.h"

namespace inflight::model {
namespace {

using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::TempDir;

RandomCheckpointOptions Tiny(const std::string& arch, DType dtype) {
  RandomCheckpointOptions o;
  EXPECT_TRUE(ApplyCheckpointPreset("tiny", &o).ok());
  o.arch = arch;
  if (arch == "gpt2") o.num_kv_heads = o.num_heads;
  o.vocab_size = 77;
  o.max_position_embeddings = 96;
  o.dtype = dtype;
  o.seed = 5;
  return o;
}

struct Case {
  std::string arch;
  DType checkpoint_dtype;
  std::optional<DType> engine_dtype;
  std::int32_t tp_size;
};

// The promise of WriteRandomEngine: the same files as make_checkpoint then inflight-build.
class RandomEngineTest : public ::testing::TestWithParam<Case> {};

TEST_P(RandomEngineTest, SameFilesAsBuildingTheRandomCheckpoint) {
  const Case c = GetParam();
  TempDir dir;
  const RandomCheckpointOptions o = Tiny(c.arch, c.checkpoint_dtype);
  auto ckpt = WriteRandomCheckpoint(o, dir / "ckpt");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();

  BuildOptions b;
  b.checkpoint_dir = dir / "ckpt";
  b.output_dir = dir / "built";
  b.dtype = c.engine_dtype;
  b.tp_size = c.tp_size;
  b.max_seq_len = 96;
  b.max_input_len = 64;
  auto built = BuildEngine(b);
  ASSERT_TRUE(built.ok()) << built.status().ToString();

  b.checkpoint_dir.clear();
  b.output_dir = dir / "direct";
  auto direct = WriteRandomEngine(o, b);
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  EXPECT_EQ(direct->num_tensors, built->num_tensors);
  EXPECT_EQ(direct->num_bytes, built->num_bytes);
  EXPECT_TRUE(direct->checkpoint_files.empty());
  ASSERT_EQ(direct->output_files.size(), built->output_files.size());
  for (std::size_t i = 0; i < built->output_files.size(); ++i) {
    const std::string name = std::filesystem::path(built->output_files[i]).filename().string();
    EXPECT_EQ(std::filesystem::path(direct->output_files[i]).filename().string(), name);
    EXPECT_TRUE(ReadBytes(direct->output_files[i]) == ReadBytes(built->output_files[i]))
        << name << " differs";
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, RandomEngineTest,
                         ::testing::Values(Case{"llama", DType::kBFloat16, std::nullopt, 1},
                                           Case{"llama", DType::kBFloat16, DType::kFloat32, 1},
                                           Case{"llama", DType::kFloat32, DType::kFloat16, 2},
                                           Case{"mistral", DType::kFloat16, std::nullopt, 1},
                                           Case{"qwen2", DType::kFloat32, std::nullopt, 2},
                                           Case{"gpt2", DType::kFloat32, std::nullopt, 1},
                                           Case{"gpt2", DType::kBFloat16, DType::kFloat32, 2}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.arch + "_" + DTypeName(info.param.checkpoint_dtype) +
                                  "_to_" +
                                  (info.param.engine_dtype ? DTypeName(*info.param.engine_dtype)
                                                           : "same") +
                                  "_tp" + std::to_string(info.param.tp_size);
                         });

TEST(RandomEngineErrorsTest, BadOptionsAreNamedAndNothingIsWritten) {
  TempDir dir;
  RandomCheckpointOptions o = Tiny("llama", DType::kFloat32);
  o.num_kv_heads = 3;
  BuildOptions b;
  b.output_dir = dir / "engine";
  const Status st = WriteRandomEngine(o, b).status();
  EXPECT_THAT(st.message(), HasSubstr("--num_kv_heads"));
  EXPECT_FALSE(std::filesystem::exists(dir / "engine"));

  o = Tiny("llama", DType::kFloat32);
  b.tp_size = 3;
  EXPECT_THAT(WriteRandomEngine(o, b).status().message(), HasSubstr("--tp_size 3"));
  b.tp_size = 1;
  b.output_dir.clear();
  EXPECT_THAT(WriteRandomEngine(o, b).status().message(), HasSubstr("--output_dir"));
}

}  // namespace
}  // namespace inflight::model
