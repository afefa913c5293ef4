#include "model/checkpoint_converter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "model/random_checkpoint.h"
#include "model/safetensors.h"
#include "unit/model_io/temp_dir.h"

namespace inflight::model {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using Matrix = std::vector<std::vector<float>>;  // rows

RandomCheckpointOptions Tiny(const std::string& arch, DType dtype = DType::kFloat32) {
  RandomCheckpointOptions o;
  EXPECT_TRUE(ApplyCheckpointPreset("tiny", &o).ok());
  o.arch = arch;
  if (arch == "gpt2") o.num_kv_heads = o.num_heads;
  o.vocab_size = 50;
  o.max_position_embeddings = 64;
  o.dtype = dtype;
  o.seed = 11;
  return o;
}

void MakeCheckpoint(const RandomCheckpointOptions& o, const std::string& dir) {
  auto r = WriteRandomCheckpoint(o, dir);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

Result<BuildSummary> Build(const std::string& ckpt, const std::string& out, int tp = 1,
                           std::optional<DType> dtype = std::nullopt) {
  BuildOptions b;
  b.checkpoint_dir = ckpt;
  b.output_dir = out;
  b.tp_size = tp;
  b.dtype = dtype;
  return BuildEngine(b);
}

// A tensor as an fp32 matrix: 2-D as is, 1-D as one column.
Matrix ToMatrix(const TensorInfo& t) {
  std::vector<float> flat(static_cast<std::size_t>(t.numel()));
  ConvertToFloat(t.dtype, t.data, flat.data(), flat.size());
  const std::size_t cols = t.shape.size() == 2 ? static_cast<std::size_t>(t.shape[1]) : 1;
  Matrix m(flat.size() / cols);
  for (std::size_t r = 0; r < m.size(); ++r) {
    m[r].assign(flat.begin() + r * cols, flat.begin() + (r + 1) * cols);
  }
  return m;
}

Matrix Transpose(const Matrix& m) {
  Matrix t(m[0].size(), std::vector<float>(m.size()));
  for (std::size_t r = 0; r < m.size(); ++r) {
    for (std::size_t c = 0; c < m[0].size(); ++c) t[c][r] = m[r][c];
  }
  return t;
}

Matrix Rows(const Matrix& m, std::size_t begin, std::size_t end) {
  return Matrix(m.begin() + begin, m.begin() + end);
}
Matrix VCat(std::initializer_list<Matrix> parts) {
  Matrix out;
  for (const Matrix& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
Matrix HCat(const Matrix& a, const Matrix& b) {
  Matrix out = a;
  for (std::size_t r = 0; r < out.size(); ++r)
    out[r].insert(out[r].end(), b[r].begin(), b[r].end());
  return out;
}

class Files {
 public:
  void Open(const std::string& path) {
    auto f = SafetensorsFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    files_.push_back(std::move(*f));
  }
  Matrix Get(const std::string& name) const {
    for (const auto& f : files_) {
      if (const TensorInfo* t = f->Find(name)) return ToMatrix(*t);
    }
    ADD_FAILURE() << "no tensor " << name;
    return {};
  }
  const TensorInfo* Info(const std::string& name) const {
    for (const auto& f : files_) {
      if (const TensorInfo* t = f->Find(name)) return t;
    }
    return nullptr;
  }
  const SafetensorsFile& file(std::size_t i) const { return *files_[i]; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
};

// Rewrites <dir>/model.safetensors through `edit` (which may rename, reshape or drop a tensor).
void RewriteCheckpoint(const std::string& dir,
                       const std::function<bool(std::string&, std::vector<std::int64_t>&,
                                                std::vector<std::byte>&)>& edit) {
  const std::string path = dir + "/model.safetensors";
  SafetensorsWriter w;
  {
    auto f = SafetensorsFile::Open(path);
    ASSERT_TRUE(f.ok());
    for (const std::string& n : (*f)->names()) {
      const TensorInfo* t = (*f)->Find(n);
      std::string name = n;
      std::vector<std::int64_t> shape = t->shape;
      std::vector<std::byte> bytes(t->data, t->data + t->nbytes);
      if (edit(name, shape, bytes)) {
        ASSERT_TRUE(w.AddBytes(name, t->dtype, shape, bytes).ok());
      }
    }
  }
  ASSERT_TRUE(w.Write(path).ok());
}

TEST(ConverterTest, LlamaFusesQkvAndGateUp) {
  TempDir dir;
  MakeCheckpoint(Tiny("llama"), dir / "ckpt");
  auto s = Build(dir / "ckpt", dir / "engine");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->output_files.size(), 2u);  // rank0 + config.json
  Files hf, en;
  hf.Open(dir / "ckpt/model.safetensors");
  en.Open(dir / "engine/rank0.safetensors");
  const std::string L = "model.layers.1.";
  EXPECT_EQ(en.Get("layers.1.qkv.weight"),
            VCat({hf.Get(L + "self_attn.q_proj.weight"), hf.Get(L + "self_attn.k_proj.weight"),
                  hf.Get(L + "self_attn.v_proj.weight")}));
  EXPECT_EQ(en.Info("layers.1.qkv.weight")->shape,
            (std::vector<std::int64_t>{(4 + 2 * 2) * 16, 64}));
  EXPECT_EQ(en.Get("layers.1.gate_up.weight"),
            VCat({hf.Get(L + "mlp.gate_proj.weight"), hf.Get(L + "mlp.up_proj.weight")}));
  EXPECT_EQ(en.Get("layers.1.attn_out.weight"), hf.Get(L + "self_attn.o_proj.weight"));
  EXPECT_EQ(en.Get("layers.1.down.weight"), hf.Get(L + "mlp.down_proj.weight"));
  EXPECT_EQ(en.Get("layers.1.attn_norm.weight"), hf.Get(L + "input_layernorm.weight"));
  EXPECT_EQ(en.Get("layers.1.mlp_norm.weight"), hf.Get(L + "post_attention_layernorm.weight"));
  EXPECT_EQ(en.Get("embed.weight"), hf.Get("model.embed_tokens.weight"));
  EXPECT_EQ(en.Get("final_norm.weight"), hf.Get("model.norm.weight"));
  EXPECT_EQ(en.Get("lm_head.weight"), hf.Get("lm_head.weight"));
  EXPECT_EQ(en.Info("layers.0.qkv.bias"), nullptr);
  EXPECT_EQ(en.Info("pos_embed.weight"), nullptr);
  // 2 layers x 6 tensors + embed + final_norm + lm_head: nothing else.
  EXPECT_EQ(en.file(0).num_tensors(), 15u);

  auto config = LoadEngineConfig(dir / "engine");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->dtype, DType::kFloat32);   // the checkpoint's torch_dtype
  EXPECT_EQ(config->build.max_seq_len, 64);    // min(max_position_embeddings, 2048)
  EXPECT_EQ(config->build.max_input_len, 64);  // min(1024, max_seq_len)
}

TEST(ConverterTest, Qwen2KeepsQkvBiasAndTiesEmbeddings) {
  TempDir dir;
  MakeCheckpoint(Tiny("qwen2"), dir / "ckpt");
  ASSERT_TRUE(Build(dir / "ckpt", dir / "engine").ok());
  Files hf, en;
  hf.Open(dir / "ckpt/model.safetensors");
  en.Open(dir / "engine/rank0.safetensors");
  const std::string L = "model.layers.0.self_attn.";
  EXPECT_EQ(en.Get("layers.0.qkv.bias"), VCat({hf.Get(L + "q_proj.bias"), hf.Get(L + "k_proj.bias"),
                                               hf.Get(L + "v_proj.bias")}));
  EXPECT_EQ(en.Info("lm_head.weight"), nullptr);
  EXPECT_EQ(en.Info("layers.0.attn_out.bias"), nullptr);
}

// Qwen3: q_norm / k_norm ([head_dim]) on every rank; attention_bias puts biases on q, k, v and o.
TEST(ConverterTest, Qwen3KeepsQkNormOnEveryRank) {
  TempDir dir;
  RandomCheckpointOptions o = Tiny("qwen3");
  o.attention_bias = true;
  MakeCheckpoint(o, dir / "ckpt");
  ASSERT_TRUE(Build(dir / "ckpt", dir / "engine", 2).ok());
  Files hf, r0, r1;
  hf.Open(dir / "ckpt/model.safetensors");
  r0.Open(dir / "engine/rank0.safetensors");
  r1.Open(dir / "engine/rank1.safetensors");
  for (int i = 0; i < 2; ++i) {
    const std::string L = "layers." + std::to_string(i) + ".";
    const std::string H = "model.layers." + std::to_string(i) + ".self_attn.";
    for (const Files* rank : {&r0, &r1}) {
      EXPECT_EQ(rank->Get(L + "q_norm.weight"), hf.Get(H + "q_norm.weight"));
      EXPECT_EQ(rank->Get(L + "k_norm.weight"), hf.Get(H + "k_norm.weight"));
      EXPECT_EQ(rank->Info(L + "q_norm.weight")->shape, (std::vector<std::int64_t>{16}));
    }
    // o_proj's bias is summed once after the all-reduce: whole on rank 0, zeros on rank 1.
    EXPECT_EQ(r0.Get(L + "attn_out.bias"), hf.Get(H + "o_proj.bias"));
    EXPECT_EQ(r1.Get(L + "attn_out.bias"), Matrix(64, std::vector<float>{0.0f}));
  }
  auto config = LoadEngineConfig(dir / "engine");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->qk_norm);
  EXPECT_TRUE(config->qkv_bias && config->attn_out_bias);
}

// Llama's mlp_bias: gate and up biases fused like their weights, down's bias as a row-split bias.
TEST(ConverterTest, LlamaMlpBiasFusesGateAndUp) {
  TempDir dir;
  RandomCheckpointOptions o = Tiny("llama");
  o.mlp_bias = true;
  MakeCheckpoint(o, dir / "ckpt");
  ASSERT_TRUE(Build(dir / "ckpt", dir / "engine").ok());
  Files hf, en;
  hf.Open(dir / "ckpt/model.safetensors");
  en.Open(dir / "engine/rank0.safetensors");
  const std::string L = "model.layers.1.mlp.";
  EXPECT_EQ(en.Get("layers.1.gate_up.bias"),
            VCat({hf.Get(L + "gate_proj.bias"), hf.Get(L + "up_proj.bias")}));
  EXPECT_EQ(en.Get("layers.1.down.bias"), hf.Get(L + "down_proj.bias"));
}

// A sliding window no shorter than max_seq_len is full attention; a shorter one is kept.
TEST(ConverterTest, AttentionWindowsFollowMaxSeqLen) {
  TempDir dir;
  RandomCheckpointOptions o = Tiny("mistral");
  o.sliding_window = 32;  // max_position_embeddings 64
  MakeCheckpoint(o, dir / "ckpt");
  BuildOptions b;
  b.checkpoint_dir = dir / "ckpt";
  b.output_dir = dir / "engine";
  b.max_seq_len = 32;
  ASSERT_TRUE(BuildEngine(b).ok());
  auto config = LoadEngineConfig(dir / "engine");
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->attention_windows.empty());
  b.max_seq_len = 64;
  ASSERT_TRUE(BuildEngine(b).ok());
  config = LoadEngineConfig(dir / "engine");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->attention_windows, (std::vector<std::int64_t>{32, 32}));
}

// --dtype, else config.json's dtype / torch_dtype, else the weights' own: a bfloat16 checkpoint
// never becomes float16 on its own.
TEST(ConverterTest, DefaultDtypeComesFromTheCheckpoint) {
  TempDir dir;
  RandomCheckpointOptions o = Tiny("llama", DType::kBFloat16);
  o.layout = ConfigLayout::kTransformers5;  // "dtype": "bfloat16"
  MakeCheckpoint(o, dir / "v5");
  ASSERT_TRUE(Build(dir / "v5", dir / "e5").ok());
  EXPECT_EQ(LoadEngineConfig(dir / "e5")->dtype, DType::kBFloat16);

  // Neither key (GPT-2's original config.json has none): the weights' dtype.
  MakeCheckpoint(o, dir / "none");
  std::string text;
  {
    std::ifstream in(dir / "none/config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  text.replace(text.find("\"dtype\""), 7, "\"unused\"");
  std::ofstream(dir / "none/config.json") << text;
  ASSERT_TRUE(Build(dir / "none", dir / "e_none").ok());
  EXPECT_EQ(LoadEngineConfig(dir / "e_none")->dtype, DType::kBFloat16);
  ASSERT_TRUE(Build(dir / "none", dir / "e_f16", 1, DType::kFloat16).ok());
  EXPECT_EQ(LoadEngineConfig(dir / "e_f16")->dtype, DType::kFloat16);

  text.replace(text.find("\"unused\""), 8, "\"dtype\"");
  text.replace(text.find("\"bfloat16\""), 10, "\"float64\"");
  std::ofstream(dir / "none/config.json") << text;
  EXPECT_THAT(Build(dir / "none", dir / "e_bad").status().message(),
              HasSubstr("dtype \"float64\" is not one of: float32, float16, bfloat16; choose the "
                        "engine's with --dtype"));
  EXPECT_TRUE(Build(dir / "none", dir / "e_bad", 1, DType::kFloat32).ok());
}

// Both layouts of one checkpoint build the same engine.
TEST(ConverterTest, BothConfigLayoutsBuildTheSameEngine) {
  TempDir dir;
  RandomCheckpointOptions o = Tiny("qwen2", DType::kBFloat16);
  o.rope.type = RopeType::kYarn;
  o.rope.theta = 1e6;
  o.rope.factor = 4.0;
  o.rope.original_max_position_embeddings = 16;
  MakeCheckpoint(o, dir / "v4");
  o.layout = ConfigLayout::kTransformers5;
  MakeCheckpoint(o, dir / "v5");
  ASSERT_TRUE(Build(dir / "v4", dir / "e4").ok());
  ASSERT_TRUE(Build(dir / "v5", dir / "e5").ok());
  auto a = LoadEngineConfig(dir / "e4"), b = LoadEngineConfig(dir / "e5");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(EngineConfigToJson(*a), EngineConfigToJson(*b));
  EXPECT_EQ(a->rope.type, RopeType::kYarn);
  EXPECT_EQ(a->rope.original_max_position_embeddings, 16);
  EXPECT_DOUBLE_EQ(a->rope.attention_factor, 0.1 * std::log(4.0) + 1.0);
}

TEST(ConverterTest, TensorParallelShardsConcatenateBackToTp1) {
  for (const char* arch : {"llama", "qwen2"}) {
    SCOPED_TRACE(arch);
    TempDir dir;
    MakeCheckpoint(Tiny(arch), dir / "ckpt");
    ASSERT_TRUE(Build(dir / "ckpt", dir / "tp1").ok());
    auto s = Build(dir / "ckpt", dir / "tp2", 2);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    Files one, r0, r1;
    one.Open(dir / "tp1/rank0.safetensors");
    r0.Open(dir / "tp2/rank0.safetensors");
    r1.Open(dir / "tp2/rank1.safetensors");
    // Per rank: 2 of 4 q heads, 1 of 2 kv heads (head_dim 16), 64 of 128 intermediate.
    const Matrix qkv = one.Get("layers.0.qkv.weight");
    const Matrix a = r0.Get("layers.0.qkv.weight"), b = r1.Get("layers.0.qkv.weight");
    ASSERT_EQ(a.size(), 64u);
    EXPECT_EQ(VCat({Rows(a, 0, 32), Rows(b, 0, 32)}), Rows(qkv, 0, 64));      // q
    EXPECT_EQ(VCat({Rows(a, 32, 48), Rows(b, 32, 48)}), Rows(qkv, 64, 96));   // k
    EXPECT_EQ(VCat({Rows(a, 48, 64), Rows(b, 48, 64)}), Rows(qkv, 96, 128));  // v
    EXPECT_EQ(HCat(r0.Get("layers.0.attn_out.weight"), r1.Get("layers.0.attn_out.weight")),
              one.Get("layers.0.attn_out.weight"));
    const Matrix gu = one.Get("layers.0.gate_up.weight");
    const Matrix g0 = r0.Get("layers.0.gate_up.weight"), g1 = r1.Get("layers.0.gate_up.weight");
    EXPECT_EQ(VCat({Rows(g0, 0, 64), Rows(g1, 0, 64)}), Rows(gu, 0, 128));        // gate
    EXPECT_EQ(VCat({Rows(g0, 64, 128), Rows(g1, 64, 128)}), Rows(gu, 128, 256));  // up
    EXPECT_EQ(HCat(r0.Get("layers.0.down.weight"), r1.Get("layers.0.down.weight")),
              one.Get("layers.0.down.weight"));
    EXPECT_EQ(r1.Get("embed.weight"), one.Get("embed.weight"));
    EXPECT_EQ(r1.Get("final_norm.weight"), one.Get("final_norm.weight"));
    if (std::string(arch) == "qwen2") {
      const Matrix bias = one.Get("layers.0.qkv.bias");
      const Matrix b0 = r0.Get("layers.0.qkv.bias"), b1 = r1.Get("layers.0.qkv.bias");
      EXPECT_EQ(VCat({Rows(b0, 0, 32), Rows(b1, 0, 32)}), Rows(bias, 0, 64));
      EXPECT_EQ(VCat({Rows(b0, 48, 64), Rows(b1, 48, 64)}), Rows(bias, 96, 128));
    }
  }
}

TEST(ConverterTest, RebuildWithFewerRanksRemovesStaleRankFiles) {
  TempDir dir;
  MakeCheckpoint(Tiny("llama"), dir / "ckpt");
  ASSERT_TRUE(Build(dir / "ckpt", dir / "engine", 4).ok());
  ASSERT_TRUE(std::filesystem::exists(dir / "engine/rank3.safetensors"));
  ASSERT_TRUE(Build(dir / "ckpt", dir / "engine", 2).ok());
  EXPECT_TRUE(std::filesystem::exists(dir / "engine/rank1.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "engine/rank2.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "engine/rank3.safetensors"));
  auto config = LoadEngineConfig(dir / "engine");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->tp_size, 2);
}

TEST(ConverterTest, MoreRanksThanKvHeadsReplicatesKvHeads) {
  TempDir dir;
  MakeCheckpoint(Tiny("llama"), dir / "ckpt");  // 4 q heads, 2 kv heads
  ASSERT_TRUE(Build(dir / "ckpt", dir / "tp1").ok());
  ASSERT_TRUE(Build(dir / "ckpt", dir / "tp4", 4).ok());
  Files one;
  one.Open(dir / "tp1/rank0.safetensors");
  const Matrix qkv = one.Get("layers.0.qkv.weight");  // q 0..64, k 64..96, v 96..128
  for (int r = 0; r < 4; ++r) {
    Files rank;
    rank.Open(dir / ("tp4/rank" + std::to_string(r) + ".safetensors"));
    const Matrix m = rank.Get("layers.0.qkv.weight");
    ASSERT_EQ(m.size(), 48u);  // 1 q head + 1 k head + 1 v head
    const std::size_t kv = static_cast<std::size_t>(r / 2);
    EXPECT_EQ(Rows(m, 0, 16), Rows(qkv, 16 * r, 16 * (r + 1))) << "rank " << r;
    EXPECT_EQ(Rows(m, 16, 32), Rows(qkv, 64 + 16 * kv, 64 + 16 * (kv + 1))) << "rank " << r;
    EXPECT_EQ(Rows(m, 32, 48), Rows(qkv, 96 + 16 * kv, 96 + 16 * (kv + 1))) << "rank " << r;
  }
}

TEST(ConverterTest, Gpt2TransposesConv1DAndSplitsBiases) {
  TempDir dir;
  MakeCheckpoint(Tiny("gpt2"), dir / "ckpt");
  ASSERT_TRUE(Build(dir / "ckpt", dir / "tp1").ok());
  ASSERT_TRUE(Build(dir / "ckpt", dir / "tp2", 2).ok());
  Files hf, en, r0, r1;
  hf.Open(dir / "ckpt/model.safetensors");
  en.Open(dir / "tp1/rank0.safetensors");
  r0.Open(dir / "tp2/rank0.safetensors");
  r1.Open(dir / "tp2/rank1.safetensors");
  const std::string L = "transformer.h.1.";
  EXPECT_EQ(en.Get("layers.1.qkv.weight"), Transpose(hf.Get(L + "attn.c_attn.weight")));
  EXPECT_EQ(en.Get("layers.1.qkv.bias"), hf.Get(L + "attn.c_attn.bias"));
  EXPECT_EQ(en.Get("layers.1.attn_out.weight"), Transpose(hf.Get(L + "attn.c_proj.weight")));
  EXPECT_EQ(en.Get("layers.1.fc.weight"), Transpose(hf.Get(L + "mlp.c_fc.weight")));
  EXPECT_EQ(en.Get("layers.1.fc.bias"), hf.Get(L + "mlp.c_fc.bias"));
  EXPECT_EQ(en.Get("layers.1.down.weight"), Transpose(hf.Get(L + "mlp.c_proj.weight")));
  EXPECT_EQ(en.Get("layers.1.down.bias"), hf.Get(L + "mlp.c_proj.bias"));
  EXPECT_EQ(en.Get("layers.1.attn_norm.bias"), hf.Get(L + "ln_1.bias"));
  EXPECT_EQ(en.Get("layers.1.mlp_norm.weight"), hf.Get(L + "ln_2.weight"));
  EXPECT_EQ(en.Get("pos_embed.weight"), hf.Get("transformer.wpe.weight"));
  EXPECT_EQ(en.Get("final_norm.bias"), hf.Get("transformer.ln_f.bias"));
  EXPECT_EQ(en.Info("lm_head.weight"), nullptr);
  EXPECT_EQ(en.Info("layers.1.gate_up.weight"), nullptr);

  // Column-split biases: rank 0 holds the bias, rank 1 zeros, so the all-reduced sum is right.
  EXPECT_EQ(r0.Get("layers.1.attn_out.bias"), hf.Get(L + "attn.c_proj.bias"));
  EXPECT_EQ(r1.Get("layers.1.attn_out.bias"), Matrix(64, std::vector<float>{0.0f}));
  EXPECT_EQ(r1.Get("layers.1.down.bias"), Matrix(64, std::vector<float>{0.0f}));
  const Matrix b = en.Get("layers.1.qkv.bias");
  const Matrix b0 = r0.Get("layers.1.qkv.bias"), b1 = r1.Get("layers.1.qkv.bias");
  EXPECT_EQ(VCat({Rows(b0, 0, 32), Rows(b1, 0, 32)}), Rows(b, 0, 64));
  EXPECT_EQ(VCat({Rows(b0, 64, 96), Rows(b1, 64, 96)}), Rows(b, 128, 192));
  EXPECT_EQ(VCat({r0.Get("layers.1.fc.bias"), r1.Get("layers.1.fc.bias")}),
            en.Get("layers.1.fc.bias"));
  EXPECT_EQ(HCat(r0.Get("layers.1.down.weight"), r1.Get("layers.1.down.weight")),
            en.Get("layers.1.down.weight"));
}

TEST(ConverterTest, Gpt2WithoutTransformerPrefixBuildsTheSameEngine) {
  TempDir dir;
  MakeCheckpoint(Tiny("gpt2"), dir / "ckpt");
  ASSERT_TRUE(Build(dir / "ckpt", dir / "with").ok());
  RewriteCheckpoint(dir / "ckpt", [](std::string& name, auto&, auto&) {
    name = name.substr(std::string("transformer.").size());
    return true;
  });
  ASSERT_TRUE(Build(dir / "ckpt", dir / "without").ok());
  Files with, without;
  with.Open(dir / "with/rank0.safetensors");
  without.Open(dir / "without/rank0.safetensors");
  for (const std::string& n : with.file(0).names()) EXPECT_EQ(without.Get(n), with.Get(n)) << n;
}

TEST(ConverterTest, DtypeConversion) {
  TempDir dir;
  MakeCheckpoint(Tiny("llama", DType::kBFloat16), dir / "bf16");
  ASSERT_TRUE(Build(dir / "bf16", dir / "e_bf16").ok());
  Files hf, en;
  hf.Open(dir / "bf16/model.safetensors");
  en.Open(dir / "e_bf16/rank0.safetensors");
  const TensorInfo* src = hf.Info("model.embed_tokens.weight");
  const TensorInfo* dst = en.Info("embed.weight");
  ASSERT_EQ(dst->dtype, DType::kBFloat16);
  ASSERT_EQ(dst->nbytes, src->nbytes);
  EXPECT_EQ(std::memcmp(dst->data, src->data, src->nbytes), 0);  // bf16 → bf16 is bit-exact

  MakeCheckpoint(Tiny("llama", DType::kFloat32), dir / "f32");
  for (DType to : {DType::kBFloat16, DType::kFloat16}) {
    const std::string out = dir / (std::string("e_") + DTypeName(to));
    ASSERT_TRUE(Build(dir / "f32", out, 1, to).ok());
    Files f32, e;
    f32.Open(dir / "f32/model.safetensors");
    e.Open(out + "/rank0.safetensors");
    const TensorInfo* s = f32.Info("model.layers.0.mlp.down_proj.weight");
    const TensorInfo* d = e.Info("layers.0.down.weight");
    ASSERT_EQ(d->dtype, to);
    const auto n = static_cast<std::size_t>(s->numel());
    std::vector<float> in(n);
    std::memcpy(in.data(), s->data, n * 4);
    std::vector<std::uint16_t> expected(n);
    ConvertFromFloat(to, in.data(), expected.data(), n);
    EXPECT_EQ(std::memcmp(d->data, expected.data(), n * 2), 0) << DTypeName(to);
    auto config = LoadEngineConfig(out);
    ASSERT_TRUE(config.ok());
    EXPECT_EQ(config->dtype, to);
  }
}

TEST(ConverterTest, ShardedCheckpointWithIndexBuildsTheSameEngine) {
  TempDir dir;
  RandomCheckpointOptions o = Tiny("llama");
  MakeCheckpoint(o, dir / "single");
  o.shards = 3;
  MakeCheckpoint(o, dir / "sharded");
  ASSERT_TRUE(std::filesystem::exists(dir / "sharded/model.safetensors.index.json"));
  ASSERT_TRUE(std::filesystem::exists(dir / "sharded/model-00003-of-00003.safetensors"));
  ASSERT_FALSE(std::filesystem::exists(dir / "sharded/model.safetensors"));
  ASSERT_TRUE(Build(dir / "single", dir / "e1").ok());
  auto s = Build(dir / "sharded", dir / "e3");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->checkpoint_files.size(), 3u);
  Files a, b;
  a.Open(dir / "e1/rank0.safetensors");
  b.Open(dir / "e3/rank0.safetensors");
  for (const std::string& n : a.file(0).names()) EXPECT_EQ(b.Get(n), a.Get(n)) << n;
}

TEST(ConverterTest, MissingTensorIsNamedAndNothingIsWritten) {
  TempDir dir;
  MakeCheckpoint(Tiny("llama"), dir / "ckpt");
  RewriteCheckpoint(dir / "ckpt", [](std::string& name, auto&, auto&) {
    return name != "model.layers.1.self_attn.k_proj.weight";
  });
  auto s = Build(dir / "ckpt", dir / "engine");
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("\"model.layers.1.self_attn.k_proj.weight\""));
  EXPECT_THAT(s.status().message(), HasSubstr("layers.1.qkv.weight"));
  EXPECT_THAT(s.status().message(), HasSubstr(dir / "ckpt/model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "engine/rank0.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "engine/config.json"));
}

TEST(ConverterTest, WrongShapeIsNamed) {
  TempDir dir;
  MakeCheckpoint(Tiny("llama"), dir / "ckpt");
  RewriteCheckpoint(dir / "ckpt", [](std::string& name, std::vector<std::int64_t>& shape, auto&) {
    if (name == "model.layers.0.mlp.up_proj.weight") shape = {64, 128};  // transposed by mistake
    return true;
  });
  auto s = Build(dir / "ckpt", dir / "engine");
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("\"model.layers.0.mlp.up_proj.weight\" in " +
                                              (dir / "ckpt/model.safetensors") +
                                              " has shape [64, 128], expected [128, 64]"));
}

TEST(ConverterTest, UnsupportedDtypeIsNamed) {
  TempDir dir;
  MakeCheckpoint(Tiny("llama"), dir / "ckpt");
  // Same bytes reinterpreted as int32: a float model's tensor with an integer dtype.
  const std::string path = dir / "ckpt/model.safetensors";
  SafetensorsWriter w;
  {
    auto f = SafetensorsFile::Open(path);
    ASSERT_TRUE(f.ok());
    for (const std::string& n : (*f)->names()) {
      const TensorInfo* t = (*f)->Find(n);
      ASSERT_TRUE(w.AddBytes(n, n == "model.norm.weight" ? DType::kInt32 : t->dtype, t->shape,
                             std::vector<std::byte>(t->data, t->data + t->nbytes))
                      .ok());
    }
  }
  ASSERT_TRUE(w.Write(path).ok());
  auto s = Build(dir / "ckpt", dir / "engine");
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(s.status().message(), HasSubstr("\"model.norm.weight\""));
  EXPECT_THAT(s.status().message(), HasSubstr("int32"));
}

TEST(ConverterTest, ConfigErrorsAreNamed) {
  TempDir dir;
  MakeCheckpoint(Tiny("llama"), dir / "ckpt");
  auto tp3 = Build(dir / "ckpt", dir / "engine", 3);
  EXPECT_THAT(tp3.status().message(), HasSubstr("--tp_size 3 must divide num_attention_heads 4"));

  BuildOptions b;
  b.checkpoint_dir = dir / "ckpt";
  b.output_dir = dir / "engine";
  b.max_input_len = 100;
  b.max_seq_len = 50;
  EXPECT_THAT(BuildEngine(b).status().message(),
              HasSubstr("--max_seq_len 50 must be >= --max_input_len 100"));
  b.max_seq_len.reset();  // default min(64, 2048) = 64 < 100
  EXPECT_THAT(BuildEngine(b).status().message(), HasSubstr("--max_seq_len 64 (the default"));
  b.max_input_len.reset();
  b.output_dir = dir / "ckpt";
  EXPECT_THAT(BuildEngine(b).status().message(), HasSubstr("is the checkpoint folder"));

  std::string config;
  {
    std::ifstream in(dir / "ckpt/config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    config = ss.str();
  }
  config.replace(config.find("LlamaForCausalLM"), 16, "FooForCausalLM");
  std::ofstream(dir / "ckpt/config.json") << config;
  auto foo = Build(dir / "ckpt", dir / "engine");
  EXPECT_EQ(foo.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(foo.status().message(), HasSubstr("Unsupported architecture \"FooForCausalLM\""));

  TempDir empty;
  auto none = Build(empty.path(), dir / "engine");
  EXPECT_THAT(none.status().message(), HasSubstr("has no config.json"));
}

}  // namespace
}  // namespace inflight::model
