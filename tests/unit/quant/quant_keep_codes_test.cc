// The CUDA runner's binding of a quantized engine (BindTransformerWeights with
// QuantizedLinears::kKeepCodes): every decoder linear keeps its stored parts, no fp32 copy is made,
// and those parts dequantize to exactly the fp32 weights the CPU runner binds from the same file,
// for each quant_algo and for a tensor-parallel GPTQ act-order engine (g_idx kept per rank).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "model/checkpoint_converter.h"
#include "model/model_shard.h"
#include "model/transformer_weights.h"
#include "unit/quant/quant_engine_util.h"
#include "unit/quant/quant_fixtures.h"

namespace inflight::model {
namespace {

using testing::Build;

void ExpectCodesDequantizeToTheCpuWeights(const std::string& engine, std::int32_t tp) {
  auto config = LoadEngineConfig(engine);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const QuantConfig& q = config->quant;
  ASSERT_TRUE(q.quantized_weights());
  for (std::int32_t rank = 0; rank < tp; ++rank) {
    auto shard = MakeModelShard(*config, rank, tp, 0, 1);
    ASSERT_TRUE(shard.ok());
    auto file = SafetensorsFile::Open(engine + "/" + shard->file_name());
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto cpu = BindTransformerWeights(*config, *shard, **file);
    auto codes = BindTransformerWeights(*config, *shard, **file, QuantizedLinears::kKeepCodes);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    ASSERT_TRUE(codes.ok()) << codes.status().ToString();
    EXPECT_TRUE(codes->dequantized.empty());
    EXPECT_LT(codes->num_bytes, cpu->num_bytes);  // codes, not fp32 copies
    for (std::size_t l = 0; l < codes->layers.size(); ++l) {
      const LayerWeights& a = codes->layers[l];
      const LayerWeights& b = cpu->layers[l];
      for (const auto& [parts, dense, scale_a, scale_b, what] :
           {std::tuple{a.qkv_quant, b.qkv, a.qkv_input_scale, b.qkv_input_scale, "qkv"},
            std::tuple{a.attn_out_quant, b.attn_out, a.attn_out_input_scale, b.attn_out_input_scale,
                       "attn_out"},
            std::tuple{a.gate_up_quant, b.gate_up, a.mlp_in_input_scale, b.mlp_in_input_scale,
                       "gate_up"},
            std::tuple{a.down_quant, b.down, a.down_input_scale, b.down_input_scale, "down"}}) {
        const std::string where =
            std::string(what) + " of layer " + std::to_string(l) + " rank " + std::to_string(rank);
        ASSERT_TRUE(parts.present()) << where;
        EXPECT_EQ(parts.code_bytes, parts.rows * q.PackedColumns(parts.cols)) << where;
        EXPECT_EQ(parts.num_zeros > 0, q.has_zero_point) << where;
        EXPECT_EQ(parts.num_g_idx, q.has_group_index ? parts.cols : 0) << where;
        EXPECT_EQ(scale_a, scale_b) << where;
        std::vector<float> out(static_cast<std::size_t>(parts.rows * parts.cols));
        kernels::cpu::DequantizeWeight(parts.view, parts.rows, parts.cols, out.data(), nullptr);
        for (std::size_t i = 0; i < out.size(); ++i) {
          ASSERT_EQ(out[i], dense.Load(static_cast<std::int64_t>(i))) << where << " element " << i;
        }
      }
      EXPECT_FALSE(a.qkv || a.attn_out || a.gate_up || a.down) << "layer " << l;
    }
  }
}

TEST(QuantizedLinearParts, BuildTimeFormatsDequantizeToTheCpuRunnersWeights) {
  testing::Fixture f;
  ASSERT_EQ(testing::MakeFixture(testing::Opts(testing::Format::kAwq), &f), "");
  for (const auto& [algo, group] :
       {std::tuple{QuantAlgo::kFp8, 128}, {QuantAlgo::kInt8Wo, 128}, {QuantAlgo::kInt4Wo, 32}}) {
    BuildOptions o;
    o.qformat = algo;
    o.group_size = group;
    const std::string out = (f.root / QuantAlgoName(algo)).string();
    ASSERT_EQ(Build(f.float_dir, out, o), "");
    ExpectCodesDequantizeToTheCpuWeights(out, 1);
  }
}

TEST(QuantizedLinearParts, ActOrderEngineKeepsGroupIndexPerRank) {
  testing::FixtureOptions o = testing::Opts(testing::Format::kGptqV1);
  o.desc_act = true;
  testing::Fixture f;
  ASSERT_EQ(testing::MakeFixture(o, &f), "");
  BuildOptions tp2;
  tp2.tp_size = 2;
  const std::string out = (f.root / "tp2").string();
  ASSERT_EQ(Build(f.quant_dir, out, tp2), "");
  ExpectCodesDequantizeToTheCpuWeights(out, 2);
}

// The CUDA runner takes an FP8 linear as per tensor where its expanded scales are one value: the
// single-tensor linears of a ModelOpt checkpoint (one scale each), not its fused q/k/v (a scale per
// part, each part a run of one scale), nor a build-time engine's per-channel scales, nor
// weight-only codes.
TEST(QuantizedLinearParts, SharesOneFp8ScaleOnlyWhereEveryChannelHasTheSameScale) {
  testing::Fixture f;
  ASSERT_EQ(testing::MakeFixture(testing::Opts(testing::Format::kModelOpt), &f), "");
  const std::string modelopt = (f.root / "modelopt").string();
  ASSERT_EQ(Build(f.quant_dir, modelopt, BuildOptions{}), "");
  BuildOptions fp8;
  fp8.qformat = QuantAlgo::kFp8;
  const std::string per_channel = (f.root / "fp8").string();
  ASSERT_EQ(Build(f.float_dir, per_channel, fp8), "");
  for (const auto& [engine, single_linears_share] :
       {std::pair{modelopt, true}, std::pair{per_channel, false}}) {
    auto config = LoadEngineConfig(engine);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    auto shard = MakeModelShard(*config, 0, 1, 0, 1);
    ASSERT_TRUE(shard.ok());
    auto file = SafetensorsFile::Open(engine + "/" + shard->file_name());
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto w = BindTransformerWeights(*config, *shard, **file, QuantizedLinears::kKeepCodes);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    const std::int64_t q_rows = config->num_attention_heads * config->head_dim;
    const std::int64_t kv_rows = config->num_kv_heads * config->head_dim;
    for (const LayerWeights& l : w->layers) {
      EXPECT_EQ(SharesOneFp8Scale(l.attn_out_quant), single_linears_share) << engine;
      EXPECT_EQ(SharesOneFp8Scale(l.down_quant), single_linears_share) << engine;
      EXPECT_FALSE(SharesOneFp8Scale(l.qkv_quant)) << engine;  // q, k and v scales differ
      // ... but each is one run: ModelOpt's q, k and v rows; per-channel scales are no runs.
      std::int64_t ends[3] = {};
      if (single_linears_share) {
        ASSERT_EQ(Fp8ScaleRuns(l.qkv_quant, 3, ends), 3) << engine;
        EXPECT_EQ(ends[0], q_rows);
        EXPECT_EQ(ends[1], q_rows + kv_rows);
        EXPECT_EQ(ends[2], q_rows + 2 * kv_rows);
        EXPECT_EQ(Fp8ScaleRuns(l.qkv_quant, 2, ends), 0) << engine;  // more runs than asked for
      } else {
        EXPECT_EQ(Fp8ScaleRuns(l.qkv_quant, 3, ends), 0) << engine;
      }
    }
  }

  // The rule itself: one ulp apart is enough, NaN shares nothing; weight-only codes never qualify.
  std::vector<float> scales(8, 0.25f);
  QuantizedLinearParts p;
  p.view.kind = kernels::cpu::QuantizedWeightKind::kFp8E4M3;
  p.view.scales = scales.data();
  p.num_scales = 8;
  EXPECT_TRUE(SharesOneFp8Scale(p));
  scales[7] = std::nextafter(0.25f, 1.0f);
  EXPECT_FALSE(SharesOneFp8Scale(p));
  scales[0] = scales[7] = std::nanf("");
  EXPECT_FALSE(SharesOneFp8Scale(p));
  scales[0] = scales[7] = 0.25f;
  EXPECT_TRUE(SharesOneFp8Scale(p));
  p.view.kind = kernels::cpu::QuantizedWeightKind::kInt8;
  EXPECT_FALSE(SharesOneFp8Scale(p));
}

}  // namespace
}  // namespace inflight::model
