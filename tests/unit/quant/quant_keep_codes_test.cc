// The CUDA runner's binding of a quantized engine (BindTransformerWeights with
// QuantizedLinears::kKeepCodes): every decoder linear keeps its stored parts, no fp32 copy is made,
// and those parts dequantize to exactly the fp32 weights the CPU runner binds from the same file,
// for each quant_algo and for a tensor-parallel GPTQ act-order engine (g_idx kept per rank).
#include <gtest/gtest.h>

#include <tuple>

#include "model/checkpoint_converter.h"
#include "model/model_shard.h"
#include "model/transformer_weights.h"
#include "unit/quant/quant_fixtures.h"

namespace inflight::model {
namespace {

std::string Build(const std::string& ckpt, const std::string& out, BuildOptions o) {
  o.checkpoint_dir = ckpt;
  o.output_dir = out;
  o.dtype = DType::kFloat32;
  o.max_seq_len = 64;
  o.tokens_per_block = 4;
  auto built = BuildEngine(o);
  return built.ok() ? "" : built.status().ToString();
}

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

}  // namespace
}  // namespace inflight::model
