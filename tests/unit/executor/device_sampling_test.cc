// The executor's side of device sampling (model/model_runner.h), with a fake runner that "samples
// on the device" by doing on the CPU what the kernel does (device_sampling_reference.h: the
// processors from the DeviceSampling lists, then the sampler's selection) on the CPU runner's
// logits, and returns only the token and its log-probability. Requests must come out exactly as
// on the host path (same tokens, log-probs, draws, stop rules and errors) whatever processors they
// use; only requests that want generation logits stay on the host.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "executor/executor_impl.h"
#include "model/model_runner.h"
#include "unit/executor/device_sampling_reference.h"
#include "unit/executor/test_engine.h"

namespace inflight {
namespace {

using std::chrono::milliseconds;
using Logits = model::SequenceStep::Logits;

const testing::TinyEngineOptions kOpts;

std::string Engine() {
  static const std::string dir = testing::TinyEngine(kOpts, "devsample");
  return dir;
}

std::unique_ptr<model::ModelRunner> CpuRunner() {
  model::RunnerOptions o;
  o.max_kv_tokens = 2048;
  auto r = model::CreateCpuModelRunner(Engine(), o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::size_t RowsOf(const model::SequenceStep& s) {
  return s.logits == Logits::kAll ? s.tokens.size() : s.logits == Logits::kLast ? 1 : 0;
}

// Wraps the CPU runner. Device-sampled sequences get their token and log-probability from
// testing::SampleLikeDevice; their rows are not returned.
class FakeDeviceRunner final : public model::ModelRunner {
 public:
  struct Seen {
    std::vector<std::uint64_t> draws;  // draw_index of each device-sampled step, in order
    int host_steps = 0;                // steps that returned logits rows (to sample on the host)
    std::set<const std::vector<float>*> bias_handles;  // DeviceSampling::embedding_bias seen
  };

  explicit FakeDeviceRunner(std::unique_ptr<model::ModelRunner> inner,
                            std::map<std::int64_t, Seen>* seen)
      : inner_(std::move(inner)), seen_(seen) {}
  const model::EngineConfig& config() const override { return inner_->config(); }
  std::int64_t num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  const char* device_name() const override { return "fake-device"; }
  std::int64_t memory_bytes() const override { return inner_->memory_bytes(); }
  bool supports_device_sampling() const override { return true; }

  Result<model::StepOutput> Step(const model::StepInput& input) override {
    model::StepInput host = input;
    bool any = false;
    for (model::SequenceStep& s : host.sequences) {
      if (!s.device_sampling) continue;
      any = true;
      EXPECT_EQ(s.logits, Logits::kNone) << "a device-sampled sequence asked for logits rows";
      s.logits = Logits::kLast;
    }
    ASSIGN_OR_RETURN(model::StepOutput full, inner_->Step(host));
    const auto vocab = static_cast<std::size_t>(full.vocab_size);
    model::StepOutput out;
    out.vocab_size = full.vocab_size;
    if (any) {
      out.sampled_tokens.assign(input.sequences.size(), -1);
      out.sampled_log_probs.assign(input.sequences.size(), std::nanf(""));
    }
    for (std::size_t i = 0; i < input.sequences.size(); ++i) {
      const model::SequenceStep& asked = input.sequences[i];
      const float* rows = full.logits.data() + static_cast<std::size_t>(full.row_begin[i]) * vocab;
      out.row_begin.push_back(static_cast<std::int32_t>(out.logits.size() / vocab));
      out.logits.insert(out.logits.end(), rows, rows + RowsOf(asked) * vocab);
      Seen& seen = (*seen_)[asked.seq_id];
      if (!asked.device_sampling) {
        if (asked.logits != Logits::kNone) ++seen.host_steps;
        continue;
      }
      const model::DeviceSampling& d = *asked.device_sampling;
      seen.draws.push_back(d.draw_index);
      if (d.embedding_bias) seen.bias_handles.insert(d.embedding_bias.get());
      std::vector<float> row(rows + (RowsOf(host.sequences[i]) - 1) * vocab,
                             rows + RowsOf(host.sequences[i]) * vocab);
      const testing::DeviceSampled sampled = testing::SampleLikeDevice(std::move(row), d);
      out.sampled_tokens[i] = sampled.token;
      out.sampled_log_probs[i] = sampled.log_prob;
    }
    return out;
  }

 private:
  std::unique_ptr<model::ModelRunner> inner_;
  std::map<std::int64_t, Seen>* seen_;
};

using Impl = Executor::Impl;

std::unique_ptr<Impl> MakeImpl(std::unique_ptr<model::ModelRunner> runner,
                               ExecutorConfig cfg = {}) {
  auto impl = Impl::CreateWithRunner(cfg, std::move(runner));
  EXPECT_TRUE(impl.ok()) << impl.status().ToString();
  return impl.ok() ? std::move(impl).value() : nullptr;
}

VecTokens Prompt(std::uint32_t seed, std::size_t len) {
  std::mt19937 rng(seed);
  VecTokens t(len);
  for (auto& x : t) x = static_cast<TokenIdType>(rng() % kOpts.vocab_size);
  return t;
}

Request Make(std::uint32_t seed, SizeType max_tokens) {
  Request r;
  r.input_token_ids = Prompt(seed, 4 + seed % 9);
  r.max_tokens = max_tokens;
  r.output_config.exclude_input_from_output = true;
  return r;
}

Request Sampled(std::uint32_t seed, SizeType max_tokens, float temperature, SizeType top_k,
                float top_p) {
  Request r = Make(seed, max_tokens);
  r.sampling_config.temperature = temperature;
  if (top_k > 0) r.sampling_config.top_k = top_k;
  if (top_p > 0) r.sampling_config.top_p = top_p;
  r.sampling_config.seed = 1000 + seed;
  return r;
}

// Enqueues all at once (so they share steps), returns the final responses in request order and
// their ids.
std::vector<Response> RunAll(Impl& ex, const std::vector<Request>& reqs,
                             std::vector<IdType>* ids_out = nullptr) {
  std::vector<IdType> ids;
  for (const Request& r : reqs) {
    auto id = ex.Enqueue(r);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(id.ok() ? *id : 0);
  }
  std::map<IdType, Response> finals;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finals.size() < ids.size() && std::chrono::steady_clock::now() < deadline) {
    for (Response& r : ex.Await(std::nullopt, milliseconds(100)))
      if (r.isFinal() || r.hasError()) finals[r.request_id] = r;
  }
  std::vector<Response> out;
  for (IdType id : ids) out.push_back(finals[id]);
  if (ids_out) *ids_out = ids;
  return out;
}

// The same requests through the plain CPU runner (host sampling) and the fake device runner.
struct Both {
  std::vector<Response> host, device;
  std::vector<IdType> device_ids;
  std::map<std::int64_t, FakeDeviceRunner::Seen> seen;
};

// `cfg` serves both (the plain CPU runner never samples on the device).
Both RunBoth(const std::vector<Request>& reqs, ExecutorConfig cfg = {}) {
  Both b;
  auto host = MakeImpl(CpuRunner(), cfg);
  auto device = MakeImpl(std::make_unique<FakeDeviceRunner>(CpuRunner(), &b.seen), cfg);
  if (!host || !device) return b;
  b.host = RunAll(*host, reqs);
  b.device = RunAll(*device, reqs, &b.device_ids);
  return b;
}

// Same tokens, finish reason and (bit for bit: the same double arithmetic) log-probs.
void ExpectSame(const Both& b, std::size_t i) {
  ASSERT_FALSE(b.host[i].hasError()) << "request " << i << ": " << b.host[i].error->ToString();
  ASSERT_FALSE(b.device[i].hasError()) << "request " << i << ": " << b.device[i].error->ToString();
  EXPECT_EQ(b.device[i].result.output_token_ids.at(0), b.host[i].result.output_token_ids.at(0))
      << "request " << i;
  EXPECT_EQ(b.device[i].result.finish_reasons.at(0), b.host[i].result.finish_reasons.at(0))
      << "request " << i;
  EXPECT_EQ(b.device[i].result.log_probs, b.host[i].result.log_probs) << "request " << i;
  EXPECT_EQ(b.device[i].result.cum_log_probs, b.host[i].result.cum_log_probs) << "request " << i;
}

const FakeDeviceRunner::Seen& SeenOf(const Both& b, std::size_t i) {
  return b.seen.at(static_cast<std::int64_t>(b.device_ids[i]));
}

// Draws 0, 1, 2, ... in order: the executor hands out each draw once and skips none.
void ExpectConsecutiveDraws(const FakeDeviceRunner::Seen& seen, std::uint64_t first) {
  for (std::size_t k = 0; k < seen.draws.size(); ++k)
    EXPECT_EQ(seen.draws[k], first + k) << "device step " << k;
}

TEST(DeviceSampling, GreedyAndSampledTokensMatchTheHostPath) {
  ASSERT_EQ(Engine().rfind("error", 0), std::string::npos) << Engine();
  const std::vector<Request> reqs = {
      Make(1, 12),
      Make(2, 9),
      Sampled(3, 14, 0.8f, 10, 0.9f),
      Sampled(4, 11, 1.3f, 0, 0.0f),
      Sampled(5, 13, 1.0f, 0, 0.7f),
      Sampled(6, 10, 0.6f, 5, 0.0f),
  };
  const Both b = RunBoth(reqs);
  ASSERT_EQ(b.device.size(), reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    ExpectSame(b, i);
    const auto& seen = b.seen.at(static_cast<std::int64_t>(b.device_ids[i]));
    EXPECT_EQ(seen.host_steps, 0) << "request " << i << " sampled on the host";
    // Every token, the first included, came from the device, one draw each.
    EXPECT_EQ(seen.draws.size(), b.device[i].result.output_token_ids.at(0).size())
        << "request " << i;
    ExpectConsecutiveDraws(seen, 0);
  }
}

TEST(DeviceSampling, StopCriteriaApplyToDeviceTokens) {
  // Where the greedy output of the request goes, so end_id and a stop word hit mid-way.
  auto host = MakeImpl(CpuRunner());
  ASSERT_TRUE(host);
  const VecTokens free_run = RunAll(*host, {Make(7, 12)})[0].result.output_token_ids.at(0);
  ASSERT_EQ(free_run.size(), 12u);
  std::size_t k = 3;
  while (k < free_run.size() &&
         std::find(free_run.begin(), free_run.begin() + k, free_run[k]) != free_run.begin() + k)
    ++k;
  ASSERT_LT(k, free_run.size()) << "no fresh token to use as end_id";

  Request with_end = Make(7, 12);
  with_end.end_id = free_run[k];
  Request with_stop = Make(7, 12);
  with_stop.stop_words = {{free_run[4], free_run[5]}};
  Request short_len = Make(7, 5);
  Request streamed = Sampled(8, 9, 0.9f, 20, 0.95f);
  streamed.streaming = true;
  const Both b = RunBoth({with_end, with_stop, short_len, streamed});
  ASSERT_EQ(b.device.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) ExpectSame(b, i);

  EXPECT_EQ(b.device[0].result.finish_reasons.at(0), FinishReason::kEndId);
  EXPECT_EQ(b.device[0].result.output_token_ids.at(0),
            VecTokens(free_run.begin(), free_run.begin() + static_cast<std::ptrdiff_t>(k)));
  // The end token was sampled (a draw) but not appended.
  EXPECT_EQ(b.seen.at(static_cast<std::int64_t>(b.device_ids[0])).draws.size(), k + 1);

  EXPECT_EQ(b.device[1].result.finish_reasons.at(0), FinishReason::kStopWords);
  EXPECT_LE(b.device[1].result.output_token_ids.at(0).size(), 6u);
  EXPECT_EQ(b.device[2].result.finish_reasons.at(0), FinishReason::kLength);
  EXPECT_EQ(b.device[2].result.output_token_ids.at(0).size(), 5u);
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& seen = b.seen.at(static_cast<std::int64_t>(b.device_ids[i]));
    EXPECT_EQ(seen.host_steps, 0) << "request " << i;
    ExpectConsecutiveDraws(seen, 0);
  }
}

// The greedy output of a request, to aim bad words and stop rules at tokens it really produces.
VecTokens FreeRun(const Request& r) {
  auto host = MakeImpl(CpuRunner());
  if (!host) return {};
  return RunAll(*host, {r})[0].result.output_token_ids.at(0);
}

TEST(DeviceSampling, EveryLogitsProcessorRunsOnTheDevice) {
  const VecTokens free_run = FreeRun(Make(17, 8));
  ASSERT_EQ(free_run.size(), 8u);
  std::vector<Request> reqs;
  reqs.push_back(Sampled(11, 8, 0.9f, 0, 0.0f));
  reqs.back().sampling_config.repetition_penalty = 1.3f;
  reqs.push_back(Make(12, 8));
  reqs.back().sampling_config.repetition_penalty = 0.8f;
  reqs.back().sampling_config.presence_penalty = 0.5f;
  reqs.push_back(Sampled(13, 8, 1.1f, 20, 0.9f));
  reqs.back().sampling_config.frequency_penalty = 0.5f;
  reqs.back().sampling_config.presence_penalty = -0.25f;
  // Log-probs show any difference in the processed row, even where the token does not change.
  for (Request& r : reqs) r.output_config.return_log_probs = true;
  reqs.push_back(Make(14, 8));
  reqs.back().output_config.return_log_probs = true;
  reqs.push_back(Sampled(15, 8, 0.7f, 0, 0.8f));
  reqs.back().output_config.return_log_probs = true;
  // Bad words aimed at the free run: its first token, and its fourth after its third.
  reqs.push_back(Make(17, 8));
  reqs.back().bad_words = {{free_run[0]}, {free_run[2], free_run[3]}};
  reqs.back().output_config.return_log_probs = true;
  reqs.push_back(Make(18, 8));
  reqs.back().embedding_bias = std::vector<float>(static_cast<std::size_t>(kOpts.vocab_size));
  for (std::size_t t = 0; t < reqs.back().embedding_bias->size(); ++t)
    (*reqs.back().embedding_bias)[t] =
        t % 3 == 0 ? -std::numeric_limits<float>::infinity() : 0.01f * static_cast<float>(t % 17);
  reqs.push_back(Make(19, 9));
  reqs.back().sampling_config.min_tokens = 5;
  reqs.back().end_id = kOpts.vocab_size - 1;
  reqs.push_back(Sampled(20, 8, 0.8f, 1, 0.0f));  // top_k 1: greedy, with a temperature
  reqs.back().sampling_config.repetition_penalty = 1.2f;
  reqs.back().output_config.return_log_probs = true;
  reqs.push_back(Sampled(21, 8, 0.9f, 10, 0.0f));  // plain, in the same batch
  const Both b = RunBoth(reqs);
  ASSERT_EQ(b.device.size(), reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    ExpectSame(b, i);
    const auto& seen = SeenOf(b, i);
    EXPECT_EQ(seen.host_steps, 0) << "request " << i << " was sampled on the host";
    ExpectConsecutiveDraws(seen, 0);
  }
  // The bad words changed the output (so the bans reached the sampler).
  const VecTokens& banned_run = b.device[5].result.output_token_ids.at(0);
  EXPECT_NE(banned_run.at(0), free_run[0]);
  for (std::size_t t = 1; t < banned_run.size(); ++t) {
    EXPECT_FALSE(banned_run[t - 1] == free_run[2] && banned_run[t] == free_run[3]) << t;
  }
  // The bias: one handle for the whole request, and banned ids never drawn.
  EXPECT_EQ(SeenOf(b, 6).bias_handles.size(), 1u);
  for (TokenIdType t : b.device[6].result.output_token_ids.at(0)) EXPECT_NE(t % 3, 0) << t;
  for (std::size_t i : {0u, 1u, 2u, 3u, 4u, 5u, 8u}) {
    ASSERT_EQ(b.device[i].result.log_probs.size(), 1u);
    for (float lp : b.device[i].result.log_probs[0]) {
      EXPECT_TRUE(std::isfinite(lp) && lp <= 0.0f) << "request " << i << ": " << lp;
    }
  }
}

TEST(DeviceSampling, LogProbsBeforeTruncationWhenNotNormalized) {
  ExecutorConfig cfg;
  cfg.normalize_log_probs = false;
  std::vector<Request> reqs = {Sampled(31, 7, 0.8f, 5, 0.7f), Make(32, 7)};
  for (Request& r : reqs) r.output_config.return_log_probs = true;
  const Both b = RunBoth(reqs, cfg);
  ASSERT_EQ(b.device.size(), reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    ExpectSame(b, i);
    EXPECT_EQ(SeenOf(b, i).host_steps, 0);
  }
}

TEST(DeviceSampling, OnlyRowsTheClientWantsGoToTheHost) {
  std::vector<Request> reqs;
  reqs.push_back(Sampled(41, 6, 0.9f, 0, 0.0f));
  reqs.back().output_config.return_generation_logits = true;
  reqs.push_back(Make(42, 6));
  reqs.back().output_config.return_context_logits = true;
  reqs.back().output_config.return_log_probs = true;
  reqs.back().sampling_config.frequency_penalty = 0.3f;
  const Both b = RunBoth(reqs);
  ASSERT_EQ(b.device.size(), reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) ExpectSame(b, i);
  // Generation logits: every row to the host, every token sampled there.
  EXPECT_TRUE(SeenOf(b, 0).draws.empty());
  EXPECT_EQ(SeenOf(b, 0).host_steps, 6);
  EXPECT_EQ(b.device[0].result.generation_logits, b.host[0].result.generation_logits);
  // Context logits: the prompt step returns all rows and the host samples the first token from
  // the last; decode steps are sampled on the device from draw 1 on.
  EXPECT_EQ(SeenOf(b, 1).host_steps, 1);
  ExpectConsecutiveDraws(SeenOf(b, 1), 1);
  EXPECT_EQ(SeenOf(b, 1).draws.size(), 5u);
  EXPECT_EQ(b.device[1].result.context_logits, b.host[1].result.context_logits);
}

TEST(DeviceSampling, ARowThatCannotBeSampledFailsLikeOnTheHost) {
  Request all_banned = Make(51, 5);
  all_banned.embedding_bias = std::vector<float>(static_cast<std::size_t>(kOpts.vocab_size),
                                                 -std::numeric_limits<float>::infinity());
  const Both b = RunBoth({all_banned, Make(52, 5)});
  ASSERT_EQ(b.device.size(), 2u);
  ASSERT_TRUE(b.host[0].hasError());
  ASSERT_TRUE(b.device[0].hasError());
  EXPECT_EQ(b.device[0].error->ToString(), b.host[0].error->ToString());
  EXPECT_EQ(SeenOf(b, 0).draws.size(), 1u);
  ExpectSame(b, 1);  // the batch goes on
}

TEST(DeviceSampling, ConfigOffKeepsEverythingOnTheHost) {
  ExecutorConfig cfg;
  cfg.device_sampling = false;
  const std::vector<Request> reqs = {Make(21, 6), Sampled(22, 6, 0.8f, 10, 0.9f)};
  const Both b = RunBoth(reqs, cfg);
  ASSERT_EQ(b.device.size(), reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    ExpectSame(b, i);
    const auto& seen = b.seen.at(static_cast<std::int64_t>(b.device_ids[i]));
    EXPECT_TRUE(seen.draws.empty());
    EXPECT_EQ(static_cast<std::size_t>(seen.host_steps), 6u);
  }
}

}  // namespace
}  // namespace inflight
