// Pre-quantized checkpoints as their tools publish them, written from a random float checkpoint:
// the quantized tensors in the format's own layout and names (not the engine's), config.json's
// quantization_config / ModelOpt's hf_quant_config.json as those tools write them, and beside it a
// float checkpoint holding exactly the values the format's own dequantization gives (computed
// here from the codes, by the format's formula, independently of src/model/quant_sources.cc).
//
// Format facts (see src/model/hf_quant_config.h for versions): AutoAWQ GEMM packs eight 4-bit
// values an int32 along the outputs in the order 0 2 4 6 1 3 5 7; AutoGPTQ packs along the inputs
// (qweight) and the outputs (qzeros), checkpoint_format "gptq" storing zero - 1, and dequantizes
// with ((stored & mask) + 1); compressed-tensors FP8 keeps weight (F8_E4M3), weight_scale [out, 1]
// (channel) or [1] (tensor), input_scale [1], self_attn.k_scale / v_scale; ModelOpt keeps scalar
// ([]) weight_scale / input_scale and self_attn.k_proj.k_scale / v_proj.v_scale.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/fp8_e4m3.h"
#include "model/random_checkpoint.h"
#include "model/safetensors.h"

namespace inflight::model::testing {

namespace fs = std::filesystem;

enum class Format {
  kAwq,
  kGptqV1,
  kGptqV2,
  kCompressedFp8Channel,
  kCompressedFp8Tensor,
  kModelOpt
};

struct FixtureOptions {
  Format format = Format::kAwq;
  int bits = 4;                 // gptq
  std::int64_t group = 32;      // awq, gptq (0: per channel, group_size -1)
  bool desc_act = false;        // gptq
  bool sym = false;             // gptq
  bool kv_fp8 = false;          // compressed-tensors, modelopt
  bool dynamic_tokens = false;  // compressed-tensors: input_activations strategy token
  double init_std = 0.5;        // of the random float weights
};

inline FixtureOptions Opts(Format f) {
  FixtureOptions o;
  o.format = f;
  return o;
}

// The tiny Llama all fixtures quantize: every decoder linear's dimensions multiples of 32.
inline RandomCheckpointOptions FixtureModel(std::uint64_t seed = 5) {
  RandomCheckpointOptions c;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.intermediate_size = 128;
  c.vocab_size = 97;
  c.max_position_embeddings = 256;
  c.seed = seed;
  c.init_std = 0.5;
  return c;
}

inline std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
inline void WriteAll(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

template <typename T>
std::vector<std::byte> Bytes(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
inline std::vector<std::uint16_t> ToHalf(const std::vector<float>& v) {
  std::vector<std::uint16_t> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = FloatToFp16(v[i]);
  return h;
}

class FixtureWriter {
 public:
  FixtureWriter(FixtureOptions o, std::uint64_t seed) : o_(o), rng_(seed) {}

  // One decoder linear W [out, in] (float) → the format's tensors under `base` ("...q_proj.") in
  // `q`, and the dequantized values in `deq`. `perm`: the act-order of its inputs (gptq desc_act).
  void Linear(const std::string& base, const std::vector<float>& w, std::int64_t out,
              std::int64_t in, const std::vector<std::int32_t>& perm, SafetensorsWriter* q,
              std::vector<float>* deq) {
    deq->assign(w.size(), 0.0f);
    switch (o_.format) {
      case Format::kAwq:
        return Awq(base, w, out, in, q, deq);
      case Format::kGptqV1:
      case Format::kGptqV2:
        return Gptq(base, w, out, in, perm, q, deq);
      default:
        return Fp8(base, w, out, in, q, deq);
    }
  }

  // Per-layer KV scales in the format's names.
  void KvScales(std::int64_t layer, SafetensorsWriter* q) {
    const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
    const bool mo = o_.format == Format::kModelOpt;
    const std::vector<float> k{0.02f + 0.01f * static_cast<float>(layer)}, v{0.03f};
    const std::vector<std::int64_t> shape =
        mo ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{1};
    (void)q->AddBytes(p + (mo ? "k_proj.k_scale" : "k_scale"), DType::kFloat32, shape, Bytes(k));
    (void)q->AddBytes(p + (mo ? "v_proj.v_scale" : "v_scale"), DType::kFloat32, shape, Bytes(v));
  }

  nlohmann::json QuantizationConfig() const {
    using nlohmann::json;
    switch (o_.format) {
      case Format::kAwq:  // AutoAWQ's save_quantized
        return {{"quant_method", "awq"},  {"zero_point", true},
                {"group_size", o_.group}, {"bits", 4},
                {"version", "gemm"},      {"modules_to_not_convert", nullptr}};
      case Format::kGptqV1:
      case Format::kGptqV2: {  // AutoGPTQ BaseQuantizeConfig / optimum GPTQConfig.to_dict
        json j = {{"quant_method", "gptq"},
                  {"bits", o_.bits},
                  {"group_size", o_.group > 0 ? o_.group : -1},
                  {"damp_percent", 0.01},
                  {"desc_act", o_.desc_act},
                  {"static_groups", false},
                  {"sym", o_.sym},
                  {"true_sequential", true},
                  {"model_name_or_path", nullptr},
                  {"model_file_base_name", "model"}};
        if (o_.format == Format::kGptqV2) j["checkpoint_format"] = "gptq_v2";
        return j;
      }
      case Format::kCompressedFp8Channel:
      case Format::kCompressedFp8Tensor: {  // llm-compressor's FP8 / FP8_DYNAMIC schemes
        const bool channel = o_.format == Format::kCompressedFp8Channel;
        json weights = {{"num_bits", 8},
                        {"type", "float"},
                        {"symmetric", true},
                        {"strategy", channel ? "channel" : "tensor"},
                        {"dynamic", false},
                        {"group_size", nullptr},
                        {"block_structure", nullptr},
                        {"actorder", nullptr},
                        {"observer", "minmax"},
                        {"observer_kwargs", json::object()}};
        json input = {{"num_bits", 8},
                      {"type", "float"},
                      {"symmetric", true},
                      {"strategy", o_.dynamic_tokens ? "token" : "tensor"},
                      {"dynamic", o_.dynamic_tokens},
                      {"group_size", nullptr},
                      {"block_structure", nullptr},
                      {"actorder", nullptr},
                      {"observer", o_.dynamic_tokens ? json(nullptr) : json("minmax")}};
        json j = {{"quant_method", "compressed-tensors"},
                  {"format", "float-quantized"},
                  {"quantization_status", "compressed"},
                  {"global_compression_ratio", 1.4},
                  {"ignore", {"lm_head"}},
                  {"sparsity_config", json::object()},
                  {"config_groups",
                   {{"group_0",
                     {{"targets", {"Linear"}},
                      {"weights", weights},
                      {"input_activations", input},
                      {"output_activations", nullptr}}}}},
                  {"kv_cache_scheme", nullptr}};
        if (o_.kv_fp8) {
          j["kv_cache_scheme"] = {{"num_bits", 8},
                                  {"type", "float"},
                                  {"symmetric", true},
                                  {"strategy", "tensor"},
                                  {"dynamic", false}};
        }
        return j;
      }
      case Format::kModelOpt:
        return nullptr;  // hf_quant_config.json instead
    }
    return nullptr;
  }

  std::string HfQuantConfigJson() const {
    nlohmann::json j = {
        {"producer", {{"name", "modelopt"}, {"version", "0.19.0"}}},
        {"quantization",
         {{"quant_algo", "FP8"},
          {"kv_cache_quant_algo", o_.kv_fp8 ? nlohmann::json("FP8") : nlohmann::json(nullptr)},
          {"exclude_modules", {"lm_head"}}}}};
    return j.dump(4);
  }

 private:
  // Asymmetric min/max quantization of `vals` to [0, maxq]: AutoAWQ's and GPTQ's (sym: zero in
  // the middle).
  void ScaleZero(const std::vector<float>& vals, int maxq, bool sym, float* scale, int* zero) {
    float lo = 0.0f, hi = 0.0f;
    for (float x : vals) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    if (sym) {
      const float amax = std::max(-lo, hi);
      *scale = amax > 0 ? 2 * amax / static_cast<float>(maxq) : 1.0f;
      *zero = (maxq + 1) / 2;
    } else {
      *scale = hi > lo ? (hi - lo) / static_cast<float>(maxq) : 1.0f;
      *zero = std::clamp(static_cast<int>(std::nearbyint(-lo / *scale)), 0, maxq);
    }
    *scale = Fp16ToFloat(FloatToFp16(*scale));  // stored as fp16 by both tools
  }
  static int Code(float w, float scale, int zero, int maxq) {
    return std::clamp(static_cast<int>(std::nearbyint(w / scale)) + zero, 0, maxq);
  }

  void Awq(const std::string& base, const std::vector<float>& w, std::int64_t out, std::int64_t in,
           SafetensorsWriter* q, std::vector<float>* deq) {
    static constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    const std::int64_t g = o_.group, groups = in / g;
    std::vector<std::int32_t> qweight(static_cast<std::size_t>(in * out / 8), 0);
    std::vector<std::int32_t> qzeros(static_cast<std::size_t>(groups * out / 8), 0);
    std::vector<float> scales(static_cast<std::size_t>(groups * out));
    for (std::int64_t o = 0; o < out; ++o) {
      for (std::int64_t gi = 0; gi < groups; ++gi) {
        std::vector<float> vals(w.begin() + o * in + gi * g, w.begin() + o * in + (gi + 1) * g);
        float s;
        int z;
        ScaleZero(vals, 15, false, &s, &z);
        scales[gi * out + o] = s;
        // Nibble n of word j holds output 8j + kOrder[n].
        const std::int64_t j = o / 8;
        const int n = static_cast<int>(std::find(kOrder, kOrder + 8, o % 8) - kOrder);
        qzeros[gi * (out / 8) + j] |=
            static_cast<std::int32_t>(static_cast<std::uint32_t>(z) << (4 * n));
        for (std::int64_t i = gi * g; i < (gi + 1) * g; ++i) {
          const int c = Code(w[o * in + i], s, z, 15);
          qweight[i * (out / 8) + j] |=
              static_cast<std::int32_t>(static_cast<std::uint32_t>(c) << (4 * n));
          (*deq)[o * in + i] = static_cast<float>(c - z) * s;
        }
      }
    }
    (void)q->AddBytes(base + "qweight", DType::kInt32, {in, out / 8}, Bytes(qweight));
    (void)q->AddBytes(base + "qzeros", DType::kInt32, {groups, out / 8}, Bytes(qzeros));
    (void)q->AddBytes(base + "scales", DType::kFloat16, {groups, out}, Bytes(ToHalf(scales)));
  }

  void Gptq(const std::string& base, const std::vector<float>& w, std::int64_t out, std::int64_t in,
            const std::vector<std::int32_t>& perm, SafetensorsWriter* q, std::vector<float>* deq) {
    const int bits = o_.bits, maxq = (1 << bits) - 1, pw = 32 / bits;
    const std::int64_t g = o_.group > 0 ? o_.group : in, groups = in / g;
    // Act-order: the k-th input quantized (perm[k]) is in group k / g.
    std::vector<std::int32_t> g_idx(static_cast<std::size_t>(in));
    for (std::int64_t k = 0; k < in; ++k) g_idx[perm[k]] = static_cast<std::int32_t>(k / g);
    std::vector<std::int32_t> qweight(static_cast<std::size_t>(in / pw * out), 0);
    std::vector<std::int32_t> qzeros(static_cast<std::size_t>(groups * out / pw), 0);
    std::vector<float> scales(static_cast<std::size_t>(groups * out));
    const bool v1 = o_.format == Format::kGptqV1;
    const std::uint32_t mask = (1u << bits) - 1u;
    for (std::int64_t o = 0; o < out; ++o) {
      for (std::int64_t gi = 0; gi < groups; ++gi) {
        std::vector<float> vals;
        for (std::int64_t i = 0; i < in; ++i)
          if (g_idx[i] == gi) vals.push_back(w[o * in + i]);
        float s;
        int z;
        ScaleZero(vals, maxq, o_.sym, &s, &z);
        scales[gi * out + o] = s;
        const std::uint32_t stored = (static_cast<std::uint32_t>(z) - (v1 ? 1u : 0u)) & mask;
        qzeros[gi * (out / pw) + o / pw] |= static_cast<std::int32_t>(stored << (bits * (o % pw)));
        // What AutoGPTQ computes from the stored zero (v1: stored + 1, unmasked).
        const int z_eff = static_cast<int>(stored) + (v1 ? 1 : 0);
        for (std::int64_t i = 0; i < in; ++i) {
          if (g_idx[i] != gi) continue;
          const int c = Code(w[o * in + i], s, z, maxq);
          qweight[(i / pw) * out + o] |=
              static_cast<std::int32_t>(static_cast<std::uint32_t>(c) << (bits * (i % pw)));
          (*deq)[o * in + i] = static_cast<float>(c - z_eff) * s;
        }
      }
    }
    (void)q->AddBytes(base + "qweight", DType::kInt32, {in / pw, out}, Bytes(qweight));
    (void)q->AddBytes(base + "qzeros", DType::kInt32, {groups, out / pw}, Bytes(qzeros));
    (void)q->AddBytes(base + "scales", DType::kFloat16, {groups, out}, Bytes(ToHalf(scales)));
    (void)q->AddBytes(base + "g_idx", DType::kInt32, {in}, Bytes(g_idx));
  }

  void Fp8(const std::string& base, const std::vector<float>& w, std::int64_t out, std::int64_t in,
           SafetensorsWriter* q, std::vector<float>* deq) {
    const bool channel = o_.format == Format::kCompressedFp8Channel;
    std::vector<float> scales(channel ? static_cast<std::size_t>(out) : 1, 0.0f);
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < in; ++i) {
        float& s = scales[channel ? o : 0];
        s = std::max(s, std::fabs(w[o * in + i]) / kFp8E4M3Max);
      }
    std::vector<std::uint8_t> codes(w.size());
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < in; ++i) {
        const float s = scales[channel ? o : 0];
        codes[o * in + i] = FloatToFp8E4M3(w[o * in + i] / s);
        (*deq)[o * in + i] = Fp8E4M3ToFloat(codes[o * in + i]) * s;
      }
    const bool mo = o_.format == Format::kModelOpt;
    const std::vector<std::int64_t> scalar =
        mo ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{1};
    (void)q->AddBytes(base + "weight", DType::kFloat8E4M3, {out, in}, Bytes(codes));
    (void)q->AddBytes(base + "weight_scale", DType::kFloat32,
                      channel ? std::vector<std::int64_t>{out, 1} : scalar, Bytes(scales));
    if (!o_.dynamic_tokens) {
      std::uniform_real_distribution<float> u(0.01f, 0.03f);
      (void)q->AddBytes(base + "input_scale", DType::kFloat32, scalar,
                        Bytes(std::vector<float>{u(rng_)}));
    }
  }

  FixtureOptions o_;
  std::mt19937 rng_;
};

struct Fixture {
  fs::path root;
  std::string float_dir, quant_dir, dequant_dir;
  ~Fixture() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

// Writes <root>/float (random), <root>/quant (the format) and <root>/dequant (float, the
// format's dequantized values in place of every decoder linear). Returns an error text or "".
inline std::string MakeFixture(const FixtureOptions& o, Fixture* f, std::uint64_t seed = 5) {
  static std::atomic<int> counter{0};
  f->root = fs::temp_directory_path() /
            ("inflight_quant_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(f->root);
  f->float_dir = (f->root / "float").string();
  f->quant_dir = (f->root / "quant").string();
  f->dequant_dir = (f->root / "dequant").string();
  RandomCheckpointOptions model = FixtureModel(seed);
  model.init_std = o.init_std;
  auto written = WriteRandomCheckpoint(model, f->float_dir);
  if (!written.ok()) return written.status().ToString();
  auto file = SafetensorsFile::Open(f->float_dir + "/model.safetensors");
  if (!file.ok()) return file.status().ToString();
  fs::create_directories(f->quant_dir);
  fs::create_directories(f->dequant_dir);
  FixtureWriter writer(o, seed);
  SafetensorsWriter q, d;
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::map<std::string, std::vector<std::int32_t>> perms;  // one per layer input (q/k/v share)
  auto perm_for = [&](const std::string& key, std::int64_t n) {
    auto it = perms.find(key);
    if (it != perms.end()) return it->second;
    std::vector<std::int32_t> p(static_cast<std::size_t>(n));
    std::iota(p.begin(), p.end(), 0);
    if (o.desc_act) std::shuffle(p.begin(), p.end(), rng);
    return perms[key] = p;
  };
  for (const std::string& name : (*file)->names()) {
    const TensorInfo* t = (*file)->Find(name);
    std::vector<float> w(static_cast<std::size_t>(t->numel()));
    ConvertToFloat(t->dtype, t->data, w.data(), w.size());
    const bool linear = name.rfind("model.layers.", 0) == 0 && name.size() > 12 &&
                        name.substr(name.size() - 12) == "_proj.weight";
    if (!linear) {
      (void)q.AddBytes(name, DType::kFloat32, t->shape, Bytes(w));
      (void)d.AddBytes(name, DType::kFloat32, t->shape, Bytes(w));
      continue;
    }
    const std::string base = name.substr(0, name.size() - std::string("weight").size());
    const std::string layer = name.substr(0, name.find(".", 13));
    const bool shares_input = name.find("q_proj") != std::string::npos ||
                              name.find("k_proj") != std::string::npos ||
                              name.find("v_proj") != std::string::npos;
    const bool mlp_in =
        name.find("gate_proj") != std::string::npos || name.find("up_proj") != std::string::npos;
    const std::string key = layer + (shares_input ? ".attn_in" : mlp_in ? ".mlp_in" : base);
    std::vector<float> deq;
    writer.Linear(base, w, t->shape[0], t->shape[1], perm_for(key, t->shape[1]), &q, &deq);
    (void)d.AddBytes(name, DType::kFloat32, t->shape, Bytes(deq));
  }
  if (o.kv_fp8) {
    for (std::int64_t l = 0; l < model.num_layers; ++l) writer.KvScales(l, &q);
  }
  if (Status st = q.Write(f->quant_dir + "/model.safetensors"); !st.ok()) return st.ToString();
  if (Status st = d.Write(f->dequant_dir + "/model.safetensors"); !st.ok()) return st.ToString();
  const std::string config = ReadAll(fs::path(f->float_dir) / "config.json");
  WriteAll(fs::path(f->dequant_dir) / "config.json", config);
  nlohmann::json j = nlohmann::json::parse(config);
  const nlohmann::json qc = writer.QuantizationConfig();
  if (!qc.is_null()) j["quantization_config"] = qc;
  WriteAll(fs::path(f->quant_dir) / "config.json", j.dump(2));
  if (o.format == Format::kModelOpt) {
    WriteAll(fs::path(f->quant_dir) / "hf_quant_config.json", writer.HfQuantConfigJson());
  }
  return "";
}

}  // namespace inflight::model::testing
