// inflight-build --calib_dataset on the CPU: the calibration pass records each layer's activation
// amax (checked against layer 0's inputs computed here from the checkpoint's tensors), and a
// calibrated FP8 engine holds what TensorRT-LLM's FP8 recipe gives: one weight scale per GEMM
// (the largest |w| of the q/k/v or gate/up weights fused into it), static input scales and KV
// scales of amax / 448, the same on every tensor-parallel rank; it serves within the FP8 bound of
// quant_engine_test.cc. Then the dataset files as `datasets` writes them, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/checkpoint_index.h"
#include "model/fp8_calibration.h"
#include "model/static_fp8_scales.h"
#include "unit/quant/quant_engine_util.h"
#include "unit/quant/quant_fixtures.h"

namespace inflight::model {
namespace {

using testing::Build;
using testing::Fixture;
using testing::Format;

std::vector<VecTokens> Samples() {
  // Lengths 10, 37 and 5: with max_num_tokens 40 each is a step of its own.
  std::vector<VecTokens> s;
  for (const auto& [n, mul] : {std::pair{10, 7}, std::pair{37, 11}, std::pair{5, 13}}) {
    VecTokens ids;
    for (int t = 0; t < n; ++t) ids.push_back((mul * t + 3 * n) % 97);
    s.push_back(ids);
  }
  return s;
}

std::vector<float> Floats(const CheckpointIndex& c, const std::string& name) {
  const TensorInfo* t = c.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::vector<float> v(static_cast<std::size_t>(t->numel()));
  ConvertToFloat(t->dtype, t->data, v.data(), v.size());
  return v;
}

float MaxAbs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// A calibrated fixture: the mild float checkpoint (FP8's), its float engine, the samples' amax.
struct Calibrated {
  Fixture f;
  std::string float_engine;
  ActivationAmax amax;
};

void Calibrate(Calibrated* c, std::int32_t max_num_tokens = 8192) {
  testing::FixtureOptions o = testing::Opts(Format::kAwq);
  o.init_std = 0.1;
  ASSERT_EQ(testing::MakeFixture(o, &c->f), "");
  c->float_engine = (c->f.root / ("float_engine_" + std::to_string(max_num_tokens))).string();
  BuildOptions b;
  b.max_num_tokens = max_num_tokens;
  ASSERT_EQ(Build(c->f.float_dir, c->float_engine, b), "");
  CalibrationRun run;
  run.device = CalibrationDevice::kCpu;
  run.num_threads = 1;
  auto amax = ObserveActivationAmax(c->float_engine, Samples(), run);
  ASSERT_TRUE(amax.ok()) << amax.status().ToString();
  c->amax = std::move(*amax);
}

TEST(Calibration, ObservedAmaxEqualsLayerZeroInputsComputedFromTheCheckpoint) {
  Calibrated c;
  ASSERT_NO_FATAL_FAILURE(Calibrate(&c));
  EXPECT_EQ(c.amax.samples, 3);
  EXPECT_EQ(c.amax.tokens, 10 + 37 + 5);
  ASSERT_EQ(c.amax.layers.size(), 2u);
  for (const auto& layer : c.amax.layers) {
    for (float a : layer) EXPECT_TRUE(std::isfinite(a) && a > 0.0f) << a;
  }

  // Layer 0: normed = RMSNorm(embed(tokens)); its amax is the q/k/v input's, and V = normed · Wvᵀ.
  auto index = CheckpointIndex::Open(c.f.float_dir, false);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  const auto config =
      nlohmann::json::parse(testing::ReadAll(std::filesystem::path(c.f.float_dir) / "config.json"));
  const double eps = config.at("rms_norm_eps").get<double>();
  const std::int64_t h = config.at("hidden_size").get<std::int64_t>();
  const std::vector<float> embed = Floats(**index, "model.embed_tokens.weight");
  const std::vector<float> norm = Floats(**index, "model.layers.0.input_layernorm.weight");
  const std::vector<float> wv = Floats(**index, "model.layers.0.self_attn.v_proj.weight");
  const auto v_rows = static_cast<std::int64_t>(wv.size()) / h;
  double qkv_in = 0, v = 0;
  for (const VecTokens& sample : Samples()) {
    for (const TokenIdType id : sample) {
      const float* x = embed.data() + id * h;
      double ss = 0;
      for (std::int64_t i = 0; i < h; ++i) ss += double(x[i]) * x[i];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(h) + eps);
      std::vector<double> normed(static_cast<std::size_t>(h));
      for (std::int64_t i = 0; i < h; ++i) {
        normed[i] = x[i] * inv * norm[i];
        qkv_in = std::max(qkv_in, std::fabs(normed[i]));
      }
      for (std::int64_t r = 0; r < v_rows; ++r) {
        double dot = 0;
        for (std::int64_t i = 0; i < h; ++i) dot += normed[i] * wv[r * h + i];
        v = std::max(v, std::fabs(dot));
      }
    }
  }
  EXPECT_NEAR(c.amax.at(0, AmaxPoint::kQkvInput), qkv_in, 1e-5 * qkv_in);
  EXPECT_NEAR(c.amax.at(0, AmaxPoint::kValue), v, 1e-5 * v);

  // The steps' packing does not change what is seen: one sample a step (max_num_tokens 40).
  Calibrated split;
  ASSERT_NO_FATAL_FAILURE(Calibrate(&split, 40));
  for (std::int64_t l = 0; l < 2; ++l) {
    for (int p = 0; p < kNumAmaxPoints; ++p) {
      const auto point = static_cast<AmaxPoint>(p);
      EXPECT_NEAR(split.amax.at(l, point), c.amax.at(l, point), 1e-6 * c.amax.at(l, point))
          << "layer " << l << " point " << p;
    }
  }
}

float EngineScalar(const SafetensorsFile& file, const std::string& name, int i = 0) {
  const TensorInfo* t = file.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr || t->dtype != DType::kFloat32) return NAN;
  return reinterpret_cast<const float*>(t->data)[i];
}

TEST(Calibration, CalibratedFp8EngineHoldsTensorScalesPerGemmAndTheObservedInputScales) {
  Calibrated c;
  ASSERT_NO_FATAL_FAILURE(Calibrate(&c));
  auto calibration = std::make_shared<const ActivationAmax>(c.amax);
  auto index = CheckpointIndex::Open(c.f.float_dir, false);
  ASSERT_TRUE(index.ok());
  auto weight_amax = [&](std::int64_t layer, std::initializer_list<const char*> names) {
    float m = 0.0f;
    for (const char* n : names)
      m = std::max(m, MaxAbs(Floats(**index, "model.layers." + std::to_string(layer) + "." + n)));
    return m;
  };
  std::vector<float> tp1_scales;
  for (const std::int32_t tp : {1, 2}) {
    SCOPED_TRACE("tp_size " + std::to_string(tp));
    const std::string engine = (c.f.root / ("calibrated_tp" + std::to_string(tp))).string();
    BuildOptions b;
    b.qformat = QuantAlgo::kFp8;
    b.kv_cache_fp8 = true;
    b.tp_size = tp;
    b.calibration = calibration;
    ASSERT_EQ(Build(c.f.float_dir, engine, b), "");
    auto config = LoadEngineConfig(engine);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->quant.weight_granularity, WeightScaleGranularity::kPerTensor);
    EXPECT_EQ(config->quant.activation_scaling, ActivationScaling::kStatic);
    EXPECT_NE(config->quant.source.find("--calib_dataset"), std::string::npos);
    std::vector<float> scales;
    for (std::int32_t rank = 0; rank < tp; ++rank) {
      auto file = SafetensorsFile::Open(engine + "/rank" + std::to_string(rank) + ".safetensors");
      ASSERT_TRUE(file.ok()) << file.status().ToString();
      for (std::int64_t l = 0; l < 2; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        const struct {
          const char* linear;
          std::initializer_list<const char*> weights;
          AmaxPoint input;
        } linears[] = {
            {"qkv",
             {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"},
             AmaxPoint::kQkvInput},
            {"attn_out", {"self_attn.o_proj.weight"}, AmaxPoint::kAttnOutInput},
            {"gate_up", {"mlp.gate_proj.weight", "mlp.up_proj.weight"}, AmaxPoint::kMlpInput},
            {"down", {"mlp.down_proj.weight"}, AmaxPoint::kDownInput},
        };
        for (const auto& linear : linears) {
          const std::string name = p + linear.linear;
          const float w = EngineScalar(**file, name + ".weight_scale");
          const float in = EngineScalar(**file, name + ".input_scale");
          EXPECT_FLOAT_EQ(w, weight_amax(l, linear.weights) / 448.0f) << name;
          EXPECT_FLOAT_EQ(in, c.amax.at(l, linear.input) / 448.0f) << name;
          scales.push_back(w);
          scales.push_back(in);
        }
        EXPECT_FLOAT_EQ(EngineScalar(**file, p + "kv_cache_scale", 0),
                        c.amax.at(l, AmaxPoint::kKey) / 448.0f);
        EXPECT_FLOAT_EQ(EngineScalar(**file, p + "kv_cache_scale", 1),
                        c.amax.at(l, AmaxPoint::kValue) / 448.0f);
      }
    }
    if (tp == 1) {
      tp1_scales = scales;
      // Serves within quant_engine_test.cc's FP8 bound of the float engine, and is quantized.
      const double err =
          testing::MaxRelError(testing::Logits(engine), testing::Logits(c.float_engine));
      std::printf("calibrated fp8 + fp8 kv: logits normalised error %.4f\n", err);
      EXPECT_LE(err, 0.2);
      EXPECT_GT(err, 0.0);
    } else {
      // Every rank holds the scales of the whole tensors (tp 1's, each rank in turn).
      std::vector<float> expected;
      for (std::int32_t rank = 0; rank < tp; ++rank)
        expected.insert(expected.end(), tp1_scales.begin(), tp1_scales.end());
      EXPECT_EQ(scales, expected);
    }
  }
}

TEST(Calibration, DatasetFilesAreReadAsDatasetsWritesThem) {
  Fixture f;
  ASSERT_EQ(testing::MakeFixture(testing::Opts(Format::kAwq), &f), "");
  auto read = [&](const std::string& text, std::int64_t size = 512, std::int64_t len = 512) {
    const auto path = f.root / "data.jsonl";
    testing::WriteAll(path, text);
    CalibrationDatasetOptions o;
    o.path = path.string();
    o.calib_size = size;
    o.max_seq_length = len;
    o.vocab_size = 97;
    return ReadCalibrationDataset(o);
  };
  // JSON lines as Dataset.to_json writes them: input_ids taken as they are, blank lines skipped.
  auto lines = read("{\"input_ids\": [1, 2, 3], \"id\": \"a\"}\n\n{\"input_ids\": [4, 5]}\r\n");
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  EXPECT_EQ(*lines, (std::vector<VecTokens>{{1, 2, 3}, {4, 5}}));
  // --calib_size takes the first samples, --calib_max_seq_length cuts them.
  auto cut = read("[{\"input_ids\": [1, 2, 3]}, {\"input_ids\": [4]}, {\"input_ids\": [5]}]", 2, 2);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(*cut, (std::vector<VecTokens>{{1, 2}, {4}}));

  auto error_of = [&](const std::string& text) {
    auto r = read(text);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(
      error_of("{\"input_ids\": [1, 97]}\n").find("line 1 token 1 is id 97; accepted: [0, 97)"),
      std::string::npos);
  EXPECT_NE(error_of("{\"input_ids\": [1]}\n{\"label\": 3}\n")
                .find("line 2 has none of the fields input_ids, text, article"),
            std::string::npos);
  EXPECT_NE(error_of("{\"input_ids\": [1]}\n{not json\n").find("line 2 is not JSON"),
            std::string::npos);
  EXPECT_NE(error_of("[{\"text\": 5}]").find("element 0 text is number; accepted: a string"),
            std::string::npos);
  EXPECT_NE(error_of("{\"article\": \"some text\"}\n")
                .find("line 1 is text and no tokenizer was given (--tokenizer_dir)"),
            std::string::npos);
  EXPECT_NE(error_of("\n\n").find("holds no non-empty sample"), std::string::npos);
}

TEST(Calibration, RefusedWhereItHasNoUse) {
  Calibrated c;
  ASSERT_NO_FATAL_FAILURE(Calibrate(&c));
  auto calibration = std::make_shared<const ActivationAmax>(c.amax);
  const std::string out = (c.f.root / "refused").string();
  BuildOptions b;
  b.calibration = calibration;
  b.qformat = QuantAlgo::kInt4Wo;
  b.group_size = 32;
  EXPECT_NE(Build(c.f.float_dir, out, b).find("--qformat int4_wo is weight-only"),
            std::string::npos);
  // KV scales alone are calibrated with weight-only weights.
  b.kv_cache_fp8 = true;
  EXPECT_EQ(Build(c.f.float_dir, out, b), "");

  // A pre-quantized checkpoint has scales of its own.
  Fixture modelopt;
  ASSERT_EQ(testing::MakeFixture(testing::Opts(Format::kModelOpt), &modelopt), "");
  BuildOptions fp8;
  fp8.calibration = calibration;
  fp8.kv_cache_fp8 = true;
  EXPECT_NE(Build(modelopt.quant_dir, out, fp8).find("is already quantized (modelopt)"),
            std::string::npos);

  // Another model's calibration, and one that saw a non-finite value.
  fp8.qformat = QuantAlgo::kFp8;
  auto short_one = std::make_shared<ActivationAmax>(c.amax);
  short_one->layers.pop_back();
  fp8.calibration = short_one;
  EXPECT_NE(Build(c.f.float_dir, out, fp8).find("the calibration holds 1 layers"),
            std::string::npos);
  auto nan = std::make_shared<ActivationAmax>(c.amax);
  nan->layers[1][static_cast<int>(AmaxPoint::kDownInput)] = NAN;
  fp8.calibration = nan;
  EXPECT_NE(Build(c.f.float_dir, out, fp8).find("layer 1 down projection input reached NaN or inf"),
            std::string::npos);
}

}  // namespace
}  // namespace inflight::model
