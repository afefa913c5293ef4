// Quantization settings: the engine's "quantization" object, the published formats' settings
// (every refusal's text), the builder's flags, and the CUDA runner's refusal.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "kernels/cuda/paged_batch.h"
#include "model/checkpoint_converter.h"
#include "model/engine_config.h"
#include "model/hf_quant_config.h"
#include "model/random_checkpoint.h"
#include "unit/quant/quant_fixtures.h"

namespace inflight::model {
namespace {

using nlohmann::json;

std::string Refusal(const json& quantization_config) {
  auto r =
      ReadQuantizationConfig(quantization_config.dump(), "ckpt/config.json quantization_config");
  return r.ok() ? "accepted" : r.status().message();
}

json Awq() {
  return {{"quant_method", "awq"}, {"zero_point", true},
          {"group_size", 128},     {"bits", 4},
          {"version", "gemm"},     {"modules_to_not_convert", nullptr}};
}
json Gptq() {
  return {{"quant_method", "gptq"}, {"bits", 4},   {"group_size", 128},
          {"desc_act", true},       {"sym", true}, {"damp_percent", 0.01},
          {"true_sequential", true}};
}
json CompressedFp8() {
  testing::FixtureWriter w(testing::Opts(testing::Format::kCompressedFp8Tensor), 1);
  return w.QuantizationConfig();
}

TEST(HfQuantConfig, ReadsEachFormatIntoEngineSettings) {
  auto awq = ReadQuantizationConfig(Awq().dump(), "q");
  ASSERT_TRUE(awq.ok()) << awq.status().ToString();
  EXPECT_EQ(awq->engine.quant_algo, QuantAlgo::kInt4Wo);
  EXPECT_EQ(awq->engine.group_size, 128);
  EXPECT_TRUE(awq->engine.has_zero_point);
  EXPECT_FALSE(awq->engine.has_group_index);
  auto gptq = ReadQuantizationConfig(Gptq().dump(), "q");
  ASSERT_TRUE(gptq.ok()) << gptq.status().ToString();
  EXPECT_TRUE(gptq->engine.has_group_index);
  EXPECT_TRUE(gptq->gptq_zeros_minus_one);
  json g8 = Gptq();
  g8["bits"] = 8;
  g8["group_size"] = -1;
  g8["checkpoint_format"] = "gptq_v2";
  auto gptq8 = ReadQuantizationConfig(g8.dump(), "q");
  ASSERT_TRUE(gptq8.ok()) << gptq8.status().ToString();
  EXPECT_EQ(gptq8->engine.quant_algo, QuantAlgo::kInt8Wo);
  EXPECT_EQ(gptq8->engine.weight_granularity, WeightScaleGranularity::kPerChannel);
  EXPECT_FALSE(gptq8->gptq_zeros_minus_one);
  auto ct = ReadQuantizationConfig(CompressedFp8().dump(), "q");
  ASSERT_TRUE(ct.ok()) << ct.status().ToString();
  EXPECT_EQ(ct->engine.quant_algo, QuantAlgo::kFp8);
  EXPECT_EQ(ct->engine.activation_scaling, ActivationScaling::kStatic);
  EXPECT_FALSE(ct->engine.kv_cache_fp8);
}

TEST(HfQuantConfig, RefusesEveryUnsupportedSettingByName) {
  const std::string where = "ckpt/config.json quantization_config: ";
  json j = Awq();
  j["bits"] = 3;
  EXPECT_EQ(Refusal(j),
            where + "\"bits\" 3 is not supported for quant_method \"awq\"; accepted: 4");
  j = Awq();
  j["zero_point"] = false;
  EXPECT_EQ(Refusal(j), where +
                            "\"zero_point\" false is not supported for quant_method \"awq\"; "
                            "accepted: true");
  j = Awq();
  j["version"] = "gemv_fast";
  EXPECT_EQ(Refusal(j), where +
                            "\"version\" \"gemv_fast\" is not supported for quant_method "
                            "\"awq\"; accepted: gemm");
  j = Awq();
  j["modules_to_not_convert"] = {"visual"};
  EXPECT_EQ(Refusal(j), where +
                            "\"modules_to_not_convert\" [\"visual\"] is not supported; "
                            "accepted: null or [] (every decoder linear quantized)");
  j = Gptq();
  j["bits"] = 3;
  EXPECT_EQ(Refusal(j), where +
                            "\"bits\" 3 is not supported for quant_method \"gptq\"; "
                            "accepted: 4, 8");
  j = Gptq();
  j["checkpoint_format"] = "marlin";
  EXPECT_EQ(Refusal(j), where +
                            "\"checkpoint_format\" \"marlin\" is not supported; accepted: "
                            "gptq, gptq_v2");
  j = Gptq();
  j["group_size"] = 0;
  EXPECT_EQ(Refusal(j), where +
                            "\"group_size\" 0 is not supported; accepted: -1 (per channel) "
                            "or a group size >= 2");
  EXPECT_EQ(Refusal({{"quant_method", "bitsandbytes"}}),
            where +
                "\"quant_method\" \"bitsandbytes\" is not supported; accepted: "
                "compressed-tensors, modelopt, awq, gptq");
  j = CompressedFp8();
  j["format"] = "pack-quantized";
  EXPECT_EQ(Refusal(j), where +
                            "\"format\" \"pack-quantized\" is not supported; accepted: "
                            "float-quantized, naive-quantized (FP8)");
  j = CompressedFp8();
  j["config_groups"]["group_0"]["weights"]["strategy"] = "block";
  EXPECT_EQ(Refusal(j),
            "ckpt/config.json quantization_config config_groups.group_0 weights: "
            "\"strategy\" \"block\" is not supported; accepted: channel, tensor");
  j = CompressedFp8();
  j["config_groups"]["group_0"]["weights"]["num_bits"] = 4;
  EXPECT_EQ(Refusal(j),
            "ckpt/config.json quantization_config config_groups.group_0 weights: "
            "\"num_bits\" 4 is not supported; accepted: 8 (FP8 E4M3)");
  j = CompressedFp8();
  j["config_groups"]["group_0"]["input_activations"] = nullptr;
  EXPECT_EQ(Refusal(j),
            "ckpt/config.json quantization_config config_groups.group_0: "
            "\"input_activations\" null (FP8 weight-only) is not supported; accepted: "
            "FP8 activations, strategy tensor or token");
  j = CompressedFp8();
  j["ignore"] = {"lm_head", "model.layers.0.mlp.down_proj"};
  EXPECT_EQ(Refusal(j), where +
                            "\"ignore\" lists \"model.layers.0.mlp.down_proj\"; only lm_head "
                            "(and model.embed_tokens) may stay unquantized (accepted: lm_head, "
                            "re:.*lm_head)");
  auto mo = ReadModelOptQuantConfig(
      R"({"producer": {"name": "modelopt", "version": "0.19.0"},
          "quantization": {"quant_algo": "W4A8_AWQ", "kv_cache_quant_algo": null}})",
      "ckpt/hf_quant_config.json");
  ASSERT_FALSE(mo.ok());
  EXPECT_EQ(mo.status().message(),
            "ckpt/hf_quant_config.json quantization: \"quant_algo\" "
            "\"W4A8_AWQ\" is not supported; accepted: FP8");
}

TEST(EngineQuantization, RoundTripsThroughConfigJsonAndIsAbsentWhenFloat) {
  EngineConfig c;
  c.architecture_name = "LlamaForCausalLM";
  c.vocab_size = 10;
  c.hidden_size = 8;
  c.num_layers = 1;
  c.num_attention_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.intermediate_size = 16;
  EXPECT_EQ(EngineConfigToJson(c).find("quantization"), std::string::npos);
  c.quant.quant_algo = QuantAlgo::kInt4Wo;
  c.quant.weight_granularity = WeightScaleGranularity::kPerGroup;
  c.quant.group_size = 4;
  c.quant.has_zero_point = true;
  c.quant.has_group_index = true;
  c.quant.kv_cache_fp8 = true;
  c.quant.source = "gptq";
  const std::string text = EngineConfigToJson(c);
  const json j = json::parse(text)["quantization"];
  EXPECT_EQ(j["quant_algo"], "int4_wo");
  EXPECT_EQ(j["weight_scale_granularity"], "per_group");
  EXPECT_EQ(j["kv_cache_quant_algo"], "fp8");
  EXPECT_EQ(j["exclude_modules"], json::array({"lm_head"}));
  auto back = EngineConfigFromJson(text, "engine/config.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->quant.quant_algo, QuantAlgo::kInt4Wo);
  EXPECT_EQ(back->quant.group_size, 4);
  EXPECT_TRUE(back->quant.has_group_index && back->quant.has_zero_point &&
              back->quant.kv_cache_fp8);
  // An engine whose quantization this build cannot serve is refused by name.
  json bad = json::parse(text);
  bad["quantization"]["pre_quant_scale"] = true;
  auto refused = EngineConfigFromJson(bad.dump(), "engine/config.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "engine/config.json quantization: quantization.pre_quant_scale true is not supported: "
            "AWQ smoothing must be folded into the weights (as AutoAWQ checkpoints have it); "
            "accepted: false");
  bad = json::parse(text);
  bad["quantization"]["quant_algo"] = "nvfp4";
  refused = EngineConfigFromJson(bad.dump(), "engine/config.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("\"quant_algo\" is \"nvfp4\", expected one of: none, "
                                            "fp8, int8_wo, int4_wo"),
            std::string::npos)
      << refused.status().message();
}

// The CUDA kernels' own checks of an FP8 KV cache (kernels/cuda/paged_batch.h, plain C++): the
// head dims the runner accepts and the scales the kernels take.
TEST(EngineQuantization, CudaFp8KvCacheHeadDimsAndScales) {
  using kernels::cuda::Fp8KvHeadDimSupported;
  using kernels::cuda::KvFp8Scales;
  EXPECT_TRUE(Fp8KvHeadDimSupported(64));
  EXPECT_TRUE(Fp8KvHeadDimSupported(128));
  for (std::int64_t d : {0, 32, 80, 96, 256}) EXPECT_FALSE(Fp8KvHeadDimSupported(d)) << d;
  EXPECT_TRUE((KvFp8Scales{1.0f, 1.0f}.valid()));
  EXPECT_TRUE((KvFp8Scales{1e-6f, 3e3f}.valid()));
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const KvFp8Scales& s : {KvFp8Scales{0.0f, 1.0f}, KvFp8Scales{1.0f, -1.0f},
                               KvFp8Scales{inf, 1.0f}, KvFp8Scales{1.0f, nan}}) {
    EXPECT_FALSE(s.valid()) << s.k << " " << s.v;
  }
}

Result<EngineConfig> Configure(const RandomCheckpointOptions& ckpt, const BuildOptions& o,
                               const QuantConfig* file_quant = nullptr) {
  return MakeEngineConfigFromJson(CheckpointConfigJson(ckpt), "ckpt/config.json", o,
                                  DType::kFloat32, false, file_quant);
}

TEST(BuildQuantization, FlagsSetTheEngineAndRefuseWhatCannotBeBuilt) {
  RandomCheckpointOptions ckpt = testing::FixtureModel();
  BuildOptions o;
  o.qformat = QuantAlgo::kInt4Wo;
  o.group_size = 32;
  o.kv_cache_fp8 = true;
  auto c = Configure(ckpt, o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->quant.quant_algo, QuantAlgo::kInt4Wo);
  EXPECT_EQ(c->quant.group_size, 32);
  EXPECT_TRUE(c->quant.kv_cache_fp8);
  EXPECT_EQ(c->quant.source, "inflight-build --qformat int4_wo");
  // tp 2 splits down_proj's 128 inputs at 64 and o_proj's 64 at 32: group 64 cuts o_proj.
  o.tp_size = 2;
  o.group_size = 64;
  c = Configure(ckpt, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "rank 0 tensor \"layers.0.attn_out.weight\": tp_size 2 gives it input columns [0, 32) "
            "of model.layers.0.self_attn.o_proj.weight, which cut its scale groups of group_size "
            "64; accepted: a tp_size whose slices are multiples of group_size");
  o.tp_size = 1;
  o.group_size = 1;
  c = Configure(ckpt, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "--group_size 1 is not accepted; accepted: a group size >= 2 "
            "(default 128)");
  // GPT-2 is not quantized.
  RandomCheckpointOptions gpt2;
  gpt2.arch = "gpt2";
  gpt2.num_kv_heads = gpt2.num_heads;
  o.group_size = 128;
  o.qformat = QuantAlgo::kFp8;
  c = Configure(gpt2, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "--qformat fp8 is not supported for GPT2LMHeadModel; accepted "
            "architectures: LlamaForCausalLM, MistralForCausalLM, "
            "Qwen2ForCausalLM, Qwen3ForCausalLM");
  // A checkpoint that is already quantized is not quantized again.
  QuantConfig modelopt;
  modelopt.quant_algo = QuantAlgo::kFp8;
  modelopt.weight_granularity = WeightScaleGranularity::kPerChannel;
  modelopt.activation_scaling = ActivationScaling::kStatic;
  modelopt.source = "modelopt";
  c = Configure(ckpt, o, &modelopt);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "--qformat fp8: ckpt/config.json is already quantized "
            "(modelopt, quant_algo fp8); build it without --qformat");
}

}  // namespace
}  // namespace inflight::model
