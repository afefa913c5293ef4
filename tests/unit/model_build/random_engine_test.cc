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
  std::optional<QuantAlgo> qformat = std::nullopt;  // --qformat
  std::int64_t group_size = 128;                    // --group_size (int4_wo)
  bool kv_cache_fp8 = false;                        // --kv_cache_dtype fp8
  std::int32_t pp_size = 1;                         // --pp_size
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string name = c.arch + "_" + DTypeName(c.checkpoint_dtype) + "_to_" +
                     (c.engine_dtype ? DTypeName(*c.engine_dtype) : "same") + "_tp" +
                     std::to_string(c.tp_size);
  if (c.qformat) name += std::string("_") + QuantAlgoName(*c.qformat);
  if (c.qformat == QuantAlgo::kInt4Wo) name += "_g" + std::to_string(c.group_size);
  if (c.kv_cache_fp8) name += "_kvfp8";
  if (c.pp_size > 1) name += "_pp" + std::to_string(c.pp_size);
  return name;
}

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
  b.pp_size = c.pp_size;
  b.max_seq_len = 96;
  b.max_input_len = 64;
  b.qformat = c.qformat;
  b.group_size = c.group_size;
  b.kv_cache_fp8 = c.kv_cache_fp8;
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
  // The quantization asked for is in both engines (a float engine would match a float engine too).
  EXPECT_EQ(direct->config.quant.quant_algo, c.qformat.value_or(QuantAlgo::kNone));
  EXPECT_EQ(direct->config.quant.kv_cache_fp8, c.kv_cache_fp8);
  EXPECT_EQ(QuantConfigToJson(direct->config.quant), QuantConfigToJson(built->config.quant));
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
                         CaseName);

// The quantized engines: inflight-build --qformat / --kv_cache_dtype fp8 from the checkpoint.
INSTANTIATE_TEST_SUITE_P(
    Quantized, RandomEngineTest,
    ::testing::Values(
        Case{"llama", DType::kBFloat16, std::nullopt, 1, QuantAlgo::kFp8, 128, true},
        // Pipeline stages: each file its layers' parts and FP8 KV scales.
        Case{"llama", DType::kBFloat16, std::nullopt, 2, QuantAlgo::kFp8, 128, true, 2},
        Case{"llama", DType::kFloat32, std::nullopt, 1, QuantAlgo::kInt4Wo, 32, false, 2},
        Case{"llama", DType::kFloat32, DType::kBFloat16, 2, QuantAlgo::kFp8},
        Case{"llama", DType::kBFloat16, std::nullopt, 1, QuantAlgo::kInt8Wo},
        Case{"qwen2", DType::kFloat16, std::nullopt, 2, QuantAlgo::kInt8Wo, 128, true},
        Case{"llama", DType::kBFloat16, std::nullopt, 1, QuantAlgo::kInt4Wo, 32},
        Case{"mistral", DType::kFloat32, DType::kFloat16, 2, QuantAlgo::kInt4Wo, 16, true},
        Case{"llama", DType::kBFloat16, std::nullopt, 1, std::nullopt, 128, true}),
    CaseName);

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

// What a checkpoint build refuses with quantization, the random engine refuses alike, by flag.
TEST(RandomEngineErrorsTest, QuantizationRefusalsMatchTheCheckpointBuild) {
  TempDir dir;
  const RandomCheckpointOptions o = Tiny("llama", DType::kFloat32);
  BuildOptions b;
  b.output_dir = dir / "engine";
  b.qformat = QuantAlgo::kInt4Wo;
  b.group_size = 1;
  EXPECT_THAT(WriteRandomEngine(o, b).status().message(), HasSubstr("--group_size 1"));
  // tp 2 halves attn_out's 64 input columns into 32, which cuts groups of 48.
  b.group_size = 48;
  b.tp_size = 2;
  EXPECT_THAT(WriteRandomEngine(o, b).status().message(), HasSubstr("group_size 48"));
  b.tp_size = 1;
  b.group_size = 128;
  b.qformat = QuantAlgo::kFp8;
  b.kv_cache_fp8 = true;
  EXPECT_THAT(WriteRandomEngine(Tiny("gpt2", DType::kFloat32), b).status().message(),
              HasSubstr("--qformat fp8"));
  EXPECT_FALSE(std::filesystem::exists(dir / "engine"));

  // The same group refusal from a checkpoint build.
  ASSERT_TRUE(WriteRandomCheckpoint(o, dir / "ckpt").ok());
  b.checkpoint_dir = dir / "ckpt";
  b.qformat = QuantAlgo::kInt4Wo;
  b.kv_cache_fp8 = false;
  b.group_size = 48;
  b.tp_size = 2;
  EXPECT_THAT(BuildEngine(b).status().message(), HasSubstr("group_size 48"));
}

}  // namespace
}  // namespace inflight::model
