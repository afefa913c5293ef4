// The CPU runner's RoPE: dynamic NTK per sequence and step (theta grows to the length the sequence
// reaches in the step, as transformers' generate recomputes it per forward call).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "model/checkpoint_converter.h"
#include "model/cpu_model_runner.h"
#include "model/random_checkpoint.h"
#include "unit/model_cpu/test_engine.h"

namespace inflight::model {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kOriginal =
    16;  // max_position_embeddings: where dynamic theta starts to grow
constexpr std::int32_t kMaxSeqLen = 64;

RandomCheckpointOptions Llama() {
  RandomCheckpointOptions o;
  o.arch = "llama";
  o.hidden_size = 64;  // head_dim 16
  o.num_layers = 2;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.intermediate_size = 96;
  o.vocab_size = 200;
  o.max_position_embeddings = kOriginal;
  o.init_std = 0.2;
  o.seed = 31;
  return o;
}

// A checkpoint and its engine (max_seq_len 64, past the original length), removed at scope exit.
class Engine {
 public:
  explicit Engine(const RandomCheckpointOptions& o) {
    static int counter = 0;
    root_ = fs::temp_directory_path() / ("inflight_rope_runner_" + std::to_string(::getpid()) +
                                         "_" + std::to_string(counter++));
    fs::remove_all(root_);
    EXPECT_TRUE(WriteRandomCheckpoint(o, (root_ / "ckpt").string()).ok());
    BuildOptions b;
    b.checkpoint_dir = (root_ / "ckpt").string();
    b.output_dir = dir();
    b.dtype = DType::kFloat32;
    b.tokens_per_block = 4;
    b.max_seq_len = kMaxSeqLen;
    b.max_input_len = kMaxSeqLen;
    auto built = BuildEngine(b);
    EXPECT_TRUE(built.ok()) << built.status().ToString();
  }
  ~Engine() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string dir() const { return (root_ / "engine").string(); }
  Result<std::unique_ptr<ModelRunner>> Runner() const {
    RunnerOptions r;
    r.max_kv_tokens = 512;
    r.num_threads = 2;
    return CreateCpuModelRunner(dir(), r);
  }

 private:
  fs::path root_;
};

std::vector<TokenIdType> Tokens(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TokenIdType> t(n);
  for (auto& x : t) x = static_cast<TokenIdType>(rng() % 200);
  return t;
}

// Logits of every row of each sequence, all in one step (blocks 32 apart per sequence).
std::vector<std::vector<float>> Prompts(ModelRunner& runner,
                                        const std::vector<std::vector<TokenIdType>>& prompts) {
  StepInput step;
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    SequenceStep seq;
    seq.tokens = prompts[s];
    for (std::int32_t b = 0; b < 16; ++b)
      seq.block_table.push_back(static_cast<std::int32_t>(32 * s) + b);
    seq.logits = SequenceStep::Logits::kAll;
    step.sequences.push_back(seq);
  }
  auto out = runner.Step(step);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  std::vector<std::vector<float>> rows;
  for (std::size_t s = 0; out.ok() && s < prompts.size(); ++s) {
    const auto begin = out->logits.begin() + out->row_begin[s] * out->vocab_size;
    rows.emplace_back(begin,
                      begin + static_cast<std::ptrdiff_t>(prompts[s].size()) * out->vocab_size);
  }
  return rows;
}

// theta grown for a forward call whose sequence length is `length` (head_dim 16, factor 2).
double GrownTheta(std::int64_t length) {
  return 10000.0 * std::pow(2.0 * static_cast<double>(length) / kOriginal - 1.0, 16.0 / 14.0);
}

TEST(RopeRunnerTest, DynamicThetaFollowsEachSequencesLengthInTheStep) {
  RandomCheckpointOptions dynamic = Llama();
  dynamic.rope.type = RopeType::kDynamic;
  dynamic.rope.factor = 2.0;
  const Engine a(dynamic);
  auto runner = a.Runner();
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  const auto long_prompt = Tokens(24, 1), short_prompt = Tokens(12, 2);
  const auto together = Prompts(**runner, {long_prompt, short_prompt});

  // The 24-token prompt, computed in one step, is rotated with theta grown for length 24: the same
  // logits as a plain-RoPE engine with that theta (same weights: same seed).
  RandomCheckpointOptions grown = Llama();
  grown.rope.theta = GrownTheta(24);
  const Engine b(grown);
  auto grown_runner = b.Runner();
  ASSERT_TRUE(grown_runner.ok());
  EXPECT_EQ(Prompts(**grown_runner, {long_prompt})[0], together[0]);
  // The 12-token prompt (<= 16) keeps theta 10000, even in the same step as the long one.
  const Engine c(Llama());
  auto plain_runner = c.Runner();
  ASSERT_TRUE(plain_runner.ok());
  EXPECT_EQ(Prompts(**plain_runner, {short_prompt})[0], together[1]);
  EXPECT_NE(Prompts(**plain_runner, {long_prompt})[0], together[0]);  // growth matters

  // A decode step at position 24 (length 25) rotates its q and k with theta for 25, over keys
  // rotated with theta for 24: different from recomputing all 25 rows at once.
  StepInput step;
  SequenceStep seq;
  seq.tokens = long_prompt;
  for (std::int32_t blk = 0; blk < 16; ++blk) seq.block_table.push_back(blk);
  seq.logits = SequenceStep::Logits::kNone;
  step.sequences = {seq};
  auto fresh = a.Runner();
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->Step(step).ok());
  step.sequences[0].num_cached = 24;
  step.sequences[0].tokens = {7};
  step.sequences[0].logits = SequenceStep::Logits::kLast;
  auto decoded = (*fresh)->Step(step);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  auto with_token = long_prompt;
  with_token.push_back(7);
  const auto at_once = Prompts(**fresh, {with_token})[0];
  const std::vector<float> last(at_once.end() - 200, at_once.end());
  EXPECT_NE(decoded->logits, last);
  EXPECT_LT(testing::NormalisedError(decoded->logits.data(), last.data(), 200), 0.5);
}

}  // namespace
}  // namespace inflight::model
