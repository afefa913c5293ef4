// Parity with Hugging Face transformers: tests/parity/make_golden.py recorded, for small random
// fp32 checkpoints, HF's prompt logits and 16 greedy tokens. Here the same checkpoint is
// regenerated from the flags in the golden file (same generator library, same seed), built into an
// fp32 engine, and run through our CPU runner with greedy decoding done by the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>

#include "model/safetensors.h"
#include "unit/model_cpu/test_engine.h"

namespace inflight::model {
namespace {

using json = nlohmann::json;
using testing::TestEngine;

// The cases make_golden.py writes, one <name>.json each.
const char* const kCases[] = {"llama_gqa_llama3", "mistral_mqa",   "qwen2_bias",   "gpt2",
                              "llama_linear",     "qwen2_yarn_v5", "llama_bias_v5"};
constexpr double kMaxRelError = 1e-4;  // max |ours - hf| over max |hf| of each compared slice
constexpr std::int32_t kTokensPerBlock =
    4;  // small blocks: prompts span several, in shuffled order

std::filesystem::path GoldenDir() {
  const char* src = std::getenv("INFLIGHT_SOURCE_DIR");
  return std::filesystem::path(src ? src : INFLIGHT_TEST_SOURCE_DIR) / "tests" / "parity" /
         "golden";
}

// make_checkpoint's flags (as recorded in the golden file) → generator options. An unknown key
// fails: the two sides must describe the same checkpoint.
Status OptionsFromFlags(const json& flags, RandomCheckpointOptions* o) {
  std::string rope_type = "default";
  for (const auto& [key, v] : flags.items()) {
    if (key == "arch")
      o->arch = v.get<std::string>();
    else if (key == "hidden_size")
      o->hidden_size = v.get<std::int64_t>();
    else if (key == "num_layers")
      o->num_layers = v.get<std::int64_t>();
    else if (key == "num_heads")
      o->num_heads = v.get<std::int64_t>();
    else if (key == "num_kv_heads")
      o->num_kv_heads = v.get<std::int64_t>();
    else if (key == "head_dim")
      o->head_dim = v.get<std::int64_t>();
    else if (key == "intermediate_size")
      o->intermediate_size = v.get<std::int64_t>();
    else if (key == "vocab_size")
      o->vocab_size = v.get<std::int64_t>();
    else if (key == "max_position_embeddings")
      o->max_position_embeddings = v.get<std::int64_t>();
    else if (key == "rope_theta")
      o->rope.theta = v.get<double>();
    else if (key == "rope_scaling")
      rope_type = v.get<std::string>();
    else if (key == "rope_factor")
      o->rope.factor = v.get<double>();
    else if (key == "rope_low_freq_factor")
      o->rope.low_freq_factor = v.get<double>();
    else if (key == "rope_high_freq_factor")
      o->rope.high_freq_factor = v.get<double>();
    else if (key == "rope_beta_fast")
      o->rope.beta_fast = v.get<double>();
    else if (key == "rope_beta_slow")
      o->rope.beta_slow = v.get<double>();
    else if (key == "rope_original_max_position_embeddings")
      o->rope.original_max_position_embeddings = v.get<std::int64_t>();
    else if (key == "layout")
      o->layout =
          v.get<std::string>() == "5" ? ConfigLayout::kTransformers5 : ConfigLayout::kTransformers4;
    else if (key == "sliding_window")
      o->sliding_window = v.get<std::int64_t>();
    else if (key == "max_window_layers")
      o->max_window_layers = v.get<std::int64_t>();
    else if (key == "attention_bias")
      o->attention_bias = v.get<bool>();
    else if (key == "mlp_bias")
      o->mlp_bias = v.get<bool>();
    else if (key == "tie_word_embeddings")
      o->tie_word_embeddings = v.get<bool>() ? std::optional(true) : std::nullopt;
    else if (key == "init_std")
      o->init_std = v.get<double>();
    else if (key == "seed")
      o->seed = v.get<std::uint64_t>();
    else if (key == "dtype") {
      const auto d = ParseDType(v.get<std::string>());
      if (!d) return InvalidArgument("checkpoint dtype " + v.dump() + " is not a float type");
      o->dtype = *d;
    } else {
      return InvalidArgument("golden checkpoint flag \"" + key + "\" is not known to this test");
    }
  }
  const auto type = ParseRopeType(rope_type);
  if (!type) return InvalidArgument("golden rope_scaling \"" + rope_type + "\" is not a rope type");
  o->rope.type = *type;
  return Status::Ok();
}

double RelError(const float* ours, const std::vector<float>& hf) {
  double max_err = 0.0, max_ref = 1e-30;
  for (std::size_t i = 0; i < hf.size(); ++i) {
    const double err = std::fabs(static_cast<double>(ours[i]) - hf[i]);
    max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(hf[i])));
  }
  return max_err / max_ref;
}

std::int32_t Argmax(const float* row, std::int64_t n) {
  return static_cast<std::int32_t>(std::max_element(row, row + n) - row);
}

class GoldenParityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenParityTest, MatchesHuggingFace) {
  const std::filesystem::path path = GoldenDir() / (std::string(GetParam()) + ".json");
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "golden file " << path << " is missing: generate it with "
                 << "python3 tests/parity/make_golden.py --make_checkpoint "
                    "<build>/bin/make_checkpoint --out tests/parity/golden";
  }
  std::ifstream in(path);
  const json golden = json::parse(in);
  ASSERT_EQ(golden.at("format"), "inflight-golden");

  RandomCheckpointOptions options;
  ASSERT_TRUE(OptionsFromFlags(golden.at("checkpoint"), &options).ok())
      << OptionsFromFlags(golden.at("checkpoint"), &options).ToString();
  std::string error;
  auto engine = TestEngine::Make(options, DType::kFloat32, kTokensPerBlock, &error);
  ASSERT_NE(engine, nullptr) << error;

  // The regenerated checkpoint must be the one HF saw; otherwise every number below would differ.
  {
    auto file = SafetensorsFile::Open(engine->checkpoint_dir() + "/model.safetensors");
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const auto& fp = golden.at("weights_fingerprint");
    const TensorInfo* t = (*file)->Find(fp.at("tensor").get<std::string>());
    ASSERT_NE(t, nullptr) << fp.at("tensor");
    ASSERT_EQ(t->dtype, DType::kFloat32);
    const auto* w = reinterpret_cast<const float*>(t->data);
    const auto first = fp.at("first").get<std::vector<float>>();
    for (std::size_t i = 0; i < first.size(); ++i)
      ASSERT_EQ(w[i], first[i]) << "checkpoint generator changed: " << fp.at("tensor") << "[" << i
                                << "]";
  }

  const std::int64_t vocab = options.vocab_size.value_or(1000);
  const auto new_tokens = golden.at("new_tokens").get<std::size_t>();
  std::mt19937_64 rng(1234);
  for (const auto& p : golden.at("prompts")) {
    const auto prompt = p.at("prompt").get<std::vector<TokenIdType>>();
    SCOPED_TRACE(::testing::Message() << GetParam() << " prompt of " << prompt.size() << " tokens");
    const std::int64_t total = static_cast<std::int64_t>(prompt.size() + new_tokens);
    const std::int64_t num_blocks = (total + kTokensPerBlock - 1) / kTokensPerBlock + 3;
    auto runner = engine->Runner(num_blocks * kTokensPerBlock);
    ASSERT_NE(runner, nullptr);
    std::vector<std::int32_t> table(static_cast<std::size_t>(num_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);

    StepInput step;
    step.sequences.resize(1);
    SequenceStep& seq = step.sequences[0];
    seq.tokens = prompt;
    seq.block_table = table;
    seq.logits = SequenceStep::Logits::kAll;
    auto out = runner->Step(step);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->logits.size(), prompt.size() * vocab);

    const auto& prompt_logits = p.at("prompt_logits");
    ASSERT_EQ(prompt_logits.size(), prompt.size());
    for (std::size_t t = 0; t < prompt.size(); ++t) {
      const auto hf = prompt_logits[t].get<std::vector<float>>();
      const double err = RelError(out->logits.data() + t * vocab, hf);
      EXPECT_LE(err, kMaxRelError) << "prompt logits at position " << t;
    }
    const float* last = out->logits.data() + (prompt.size() - 1) * vocab;
    const auto hf_last = p.at("last_logits").get<std::vector<float>>();
    EXPECT_LE(RelError(last, hf_last), kMaxRelError) << "last-position logits";
    EXPECT_EQ(Argmax(last, vocab), p.at("last_argmax").get<std::int32_t>());

    // Greedy decoding, one token per step, as the executor would run it.
    std::vector<TokenIdType> generated = {Argmax(last, vocab)};
    while (generated.size() < new_tokens) {
      seq.num_cached = static_cast<std::int32_t>(prompt.size() + generated.size() - 1);
      seq.tokens = {generated.back()};
      seq.logits = SequenceStep::Logits::kLast;
      auto next = runner->Step(step);
      ASSERT_TRUE(next.ok()) << next.status().ToString();
      generated.push_back(Argmax(next->logits.data(), vocab));
    }
    EXPECT_EQ(generated, p.at("greedy").get<std::vector<TokenIdType>>());
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenParityTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param); });

// A golden file this test does not know would never be checked.
TEST(GoldenParityFilesTest, EveryGoldenFileIsACheckedCase) {
  if (!std::filesystem::exists(GoldenDir())) GTEST_SKIP() << GoldenDir() << " does not exist";
  const std::set<std::string> known(std::begin(kCases), std::end(kCases));
  for (const auto& entry : std::filesystem::directory_iterator(GoldenDir())) {
    if (entry.path().extension() != ".json") continue;
    EXPECT_TRUE(known.count(entry.path().stem().string()))
        << entry.path() << " is not in kCases of golden_parity_test.cc";
  }
}

}  // namespace
}  // namespace inflight::model
