// Quantized engines end to end on the CPU runner: the demo-sized Llama quantized at build time
// (fp8, int8_wo, int4_wo, FP8 KV cache) and checkpoints in each published format (AutoAWQ,
// AutoGPTQ v1 / v2 with act-order, compressed-tensors and ModelOpt FP8), each against the float
// engine of a checkpoint holding the same dequantized weights. Weight-only engines compute the
// same fp32 products from the same values: their logits must equal the float engine's exactly.
// FP8 engines also quantize activations (and K/V), which the float engine does not: their weights
// are checked exactly and their logits within a stated bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <tuple>

#include "inflight/executor.h"
#include "model/checkpoint_converter.h"
#include "model/checkpoint_index.h"
#include "model/cpu_model_runner.h"
#include "model/model_shard.h"
#include "model/quant_sources.h"
#include "model/transformer_weights.h"
#include "unit/executor/run_requests.h"
#include "unit/quant/quant_engine_util.h"
#include "unit/quant/quant_fixtures.h"

namespace inflight::model {
namespace {

using testing::Fixture;
using testing::FixtureOptions;
using testing::Format;

using testing::Build;
using testing::Logits;
using testing::MaxRelError;

// The linears the runner binds for rank `rank` of `tp`: the quantized engine's dequantization
// must equal the float engine's weights element for element.
void ExpectSameLinears(const std::string& quant_engine, const std::string& float_engine,
                       std::int32_t tp = 1) {
  for (std::int32_t rank = 0; rank < tp; ++rank) {
    std::unique_ptr<SafetensorsFile> files[2];
    TransformerWeights w[2];
    EngineConfig c[2];
    for (int e = 0; e < 2; ++e) {
      const std::string dir = e == 0 ? quant_engine : float_engine;
      auto config = LoadEngineConfig(dir);
      ASSERT_TRUE(config.ok()) << config.status().ToString();
      c[e] = *config;
      auto shard = MakeModelShard(c[e], rank, tp, 0, 1);
      ASSERT_TRUE(shard.ok());
      auto file = SafetensorsFile::Open(dir + "/" + shard->file_name());
      ASSERT_TRUE(file.ok()) << file.status().ToString();
      files[e] = std::move(*file);
      auto bound = BindTransformerWeights(c[e], *shard, *files[e]);
      ASSERT_TRUE(bound.ok()) << bound.status().ToString();
      w[e] = std::move(*bound);
    }
    ASSERT_TRUE(c[0].quant.quantized_weights());
    ASSERT_FALSE(c[1].quant.any());
    ASSERT_FALSE(w[0].dequantized.empty());
    const std::int64_t h = c[0].hidden_size, inter = c[0].intermediate_size / tp;
    const std::int64_t qkv = c[0].QkvRows(tp) * h,
                       out = h * c[0].num_attention_heads / tp * c[0].head_dim;
    for (std::size_t l = 0; l < w[0].layers.size(); ++l) {
      const LayerWeights& a = w[0].layers[l];
      const LayerWeights& b = w[1].layers[l];
      for (const auto& [x, y, n, what] :
           {std::tuple{a.qkv, b.qkv, qkv, "qkv"},
            std::tuple{a.attn_out, b.attn_out, out, "attn_out"},
            std::tuple{a.gate_up, b.gate_up, 2 * inter * h, "gate_up"},
            std::tuple{a.down, b.down, h * inter, "down"}}) {
        for (std::int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(x.Load(i), y.Load(i))
              << what << " of layer " << l << " rank " << rank << " element " << i;
        }
      }
    }
  }
}

struct BuildCase {
  const char* name;
  std::optional<QuantAlgo> qformat;
  bool kv_fp8;
  double bound;  // on the logits' normalised error against the dequantized float engine
};

// NOTE on the FP8 bounds: E4M3 keeps 3 mantissa bits, so each quantized activation (or cached
// K/V value) is off by up to 1/16 of itself; through two layers of this random model (weights of
// std 0.1) that moves the logits by 5-13% of their largest magnitude (measured 0.056 to 0.131 over
// the cases here); bound 0.2. The exactness of the FP8 path is checked op by op in
// quant_kernels_test.cc, and the weights element by element here.
TEST(QuantizedEngine, BuildTimeQuantizationServesTheDequantizedModel) {
  // Their float checkpoints are used here: sharp weights (std 0.5) for the exact weight-only
  // comparisons, milder ones (std 0.1) for FP8, whose rounding a sharp model amplifies past any
  // useful bound.
  Fixture sharp, mild;
  ASSERT_EQ(testing::MakeFixture(testing::Opts(Format::kAwq), &sharp), "");
  FixtureOptions mild_options = testing::Opts(Format::kAwq);
  mild_options.init_std = 0.1;
  ASSERT_EQ(testing::MakeFixture(mild_options, &mild), "");
  for (const BuildCase c : {BuildCase{"int8_wo", QuantAlgo::kInt8Wo, false, 0.0},
                            BuildCase{"int4_wo", QuantAlgo::kInt4Wo, false, 0.0},
                            BuildCase{"fp8", QuantAlgo::kFp8, false, 0.2},
                            BuildCase{"fp8 + fp8 kv", QuantAlgo::kFp8, true, 0.2},
                            BuildCase{"fp8 kv", std::nullopt, true, 0.2}}) {
    SCOPED_TRACE(c.name);
    const Fixture& f = c.bound == 0.0 ? sharp : mild;
    const std::string quant = (f.root / (std::string("q_") + c.name)).string();
    BuildOptions o;
    o.qformat = c.qformat;
    o.group_size = 32;
    o.kv_cache_fp8 = c.kv_fp8;
    ASSERT_EQ(Build(f.float_dir, quant, o), "");
    // The reference checkpoint: the builder's own quantization of each linear, dequantized.
    const std::string deq_ckpt = (f.root / (std::string("d_") + c.name)).string();
    std::filesystem::create_directories(deq_ckpt);
    auto index = CheckpointIndex::Open(f.float_dir, false);
    ASSERT_TRUE(index.ok());
    auto config = LoadEngineConfig(quant);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    auto source = MakeBuildTimeQuantizer(**index, config->quant);
    SafetensorsWriter writer;
    for (const std::string& path : (*index)->paths()) {
      auto file = SafetensorsFile::Open(path);
      ASSERT_TRUE(file.ok());
      for (const std::string& name : (*file)->names()) {
        const TensorInfo* t = (*file)->Find(name);
        std::vector<float> v(static_cast<std::size_t>(t->numel()));
        ConvertToFloat(t->dtype, t->data, v.data(), v.size());
        if (c.qformat && name.rfind("model.layers.", 0) == 0 &&
            name.find("_proj.weight") != std::string::npos) {
          auto m = source->Load(name, t->shape);
          ASSERT_TRUE(m.ok()) << m.status().ToString();
          v = (*m)->DequantizeAll();
        }
        ASSERT_TRUE(writer.AddBytes(name, DType::kFloat32, t->shape, testing::Bytes(v)).ok());
      }
    }
    ASSERT_TRUE(writer.Write(deq_ckpt + "/model.safetensors").ok());
    testing::WriteAll(std::filesystem::path(deq_ckpt) / "config.json",
                      testing::ReadAll(std::filesystem::path(f.float_dir) / "config.json"));
    const std::string ref = (f.root / (std::string("r_") + c.name)).string();
    ASSERT_EQ(Build(deq_ckpt, ref), "");
    if (c.qformat) ExpectSameLinears(quant, ref);
    const double err = MaxRelError(Logits(quant), Logits(ref));
    std::printf("%s: logits normalised error %.4f\n", c.name, err);
    if (c.bound == 0.0) {
      EXPECT_EQ(err, 0.0);
    } else {
      EXPECT_LE(err, c.bound);
      EXPECT_GT(err, 0.0);  // activations (or K/V) really are quantized
    }
  }
}

struct FormatCase {
  const char* name;
  FixtureOptions options;
  double bound;
};

TEST(QuantizedEngine, PublishedFormatsConvertToTheirDequantizedValues) {
  FixtureOptions awq = testing::Opts(Format::kAwq);
  FixtureOptions gptq_act = testing::Opts(Format::kGptqV1);
  gptq_act.desc_act = true;
  FixtureOptions gptq_sym = testing::Opts(Format::kGptqV1);
  gptq_sym.sym = true;
  FixtureOptions gptq8 = testing::Opts(Format::kGptqV2);
  gptq8.bits = 8;
  gptq8.group = 0;
  FixtureOptions ct_channel = testing::Opts(Format::kCompressedFp8Channel);
  ct_channel.init_std = 0.1;
  FixtureOptions ct_tensor_kv = testing::Opts(Format::kCompressedFp8Tensor);
  ct_tensor_kv.kv_fp8 = true;
  ct_tensor_kv.init_std = 0.1;
  FixtureOptions ct_dynamic = testing::Opts(Format::kCompressedFp8Channel);
  ct_dynamic.dynamic_tokens = true;
  ct_dynamic.init_std = 0.1;
  FixtureOptions modelopt = testing::Opts(Format::kModelOpt);
  modelopt.kv_fp8 = true;
  modelopt.init_std = 0.1;
  for (const FormatCase& c :
       {FormatCase{"awq", awq, 0.0}, FormatCase{"gptq act-order v1", gptq_act, 0.0},
        FormatCase{"gptq sym v1", gptq_sym, 0.0}, FormatCase{"gptq 8-bit v2", gptq8, 0.0},
        FormatCase{"compressed-tensors channel", ct_channel, 0.2},
        FormatCase{"compressed-tensors tensor + kv", ct_tensor_kv, 0.2},
        FormatCase{"compressed-tensors dynamic", ct_dynamic, 0.2},
        FormatCase{"modelopt + kv", modelopt, 0.2}}) {
    SCOPED_TRACE(c.name);
    Fixture f;
    ASSERT_EQ(testing::MakeFixture(c.options, &f), "");
    const std::string quant = (f.root / "q").string(), ref = (f.root / "r").string();
    ASSERT_EQ(Build(f.quant_dir, quant), "");
    ASSERT_EQ(Build(f.dequant_dir, ref), "");
    ExpectSameLinears(quant, ref);
    const double err = MaxRelError(Logits(quant), Logits(ref));
    std::printf("%s: logits normalised error %.4f\n", c.name, err);
    if (c.bound == 0.0) {
      EXPECT_EQ(err, 0.0);
    } else {
      EXPECT_LE(err, c.bound);
    }
  }
}

TEST(QuantizedEngine, TensorParallelSlicesKeepGroupsAndActOrder) {
  FixtureOptions o = testing::Opts(Format::kGptqV1);
  o.desc_act = true;
  Fixture f;
  ASSERT_EQ(testing::MakeFixture(o, &f), "");
  BuildOptions tp2;
  tp2.tp_size = 2;
  const std::string quant = (f.root / "q").string(), ref = (f.root / "r").string();
  ASSERT_EQ(Build(f.quant_dir, quant, tp2), "");
  ASSERT_EQ(Build(f.dequant_dir, ref, tp2), "");
  ExpectSameLinears(quant, ref, 2);
}

TEST(QuantizedEngine, ExecutorGreedyTokensEqualTheDequantizedFloatModel) {
  Fixture f;
  ASSERT_EQ(testing::MakeFixture(testing::Opts(Format::kAwq), &f), "");
  const std::string quant = (f.root / "q").string(), ref = (f.root / "r").string();
  ASSERT_EQ(Build(f.quant_dir, quant), "");
  ASSERT_EQ(Build(f.dequant_dir, ref), "");
  std::vector<std::vector<VecTokens>> outputs;
  for (const std::string& engine : {quant, ref}) {
    ExecutorConfig cfg;
    cfg.device = DeviceKind::kCpu;
    auto ex = Executor::Create(engine, cfg);
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    std::vector<Request> reqs;
    for (std::uint32_t p = 0; p < 3; ++p)
      reqs.push_back(
          inflight::testing::Greedy(inflight::testing::RandomPrompt(p, 6 + 5 * p, 97), 12));
    std::vector<VecTokens> out;
    for (const Response& r : inflight::testing::RunAll(**ex, reqs)) {
      ASSERT_TRUE(r.isFinal() && !r.hasError()) << (r.hasError() ? r.error->ToString() : "");
      out.push_back(r.result.output_token_ids.at(0));
    }
    outputs.push_back(out);
  }
  ASSERT_EQ(outputs[0].size(), 3u);
  EXPECT_EQ(outputs[0], outputs[1]);
  for (const VecTokens& t : outputs[0]) EXPECT_EQ(t.size(), 12u);
}

TEST(QuantizedEngine, MissingOrMislaidTensorsAreRefusedBeforeWriting) {
  Fixture f;
  FixtureOptions o = testing::Opts(Format::kAwq);
  ASSERT_EQ(testing::MakeFixture(o, &f), "");
  // The same checkpoint claiming 64-column groups: qzeros has the wrong shape.
  auto config = nlohmann::json::parse(testing::ReadAll(f.root / "quant" / "config.json"));
  config["quantization_config"]["group_size"] = 64;
  testing::WriteAll(f.root / "quant" / "config.json", config.dump());
  const std::string err = Build(f.quant_dir, (f.root / "q").string());
  EXPECT_NE(err.find("checkpoint tensor \"model.layers.0.self_attn.q_proj.qzeros\""),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("has shape [2, 8], expected [1, 8]"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(f.root / "q" / "config.json"));
}

}  // namespace
}  // namespace inflight::model
