// The executor's side of device sampling (model/model_runner.h), with a fake runner that "samples
// on the device" by doing on the CPU what the kernel does (device_sampling_reference.h: the
// processors from the DeviceSampling lists, then the sampler's selection) on the CPU runner's
// logits, and returns only the token and its log-probability. Requests must come out exactly as
// on the host path (same tokens, log-probs, draws, stop rules and errors) whatever processors they
// use; only requests that want generation logits stay on the host. Each case also runs with
// lookahead (model_runner.h: the fake reads a step's placeholder tokens from its previous step's
// samples, as the CUDA runner does on the device), which must change nothing either.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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

  // lookahead: supports_lookahead, and every step with a previous_step_row counts in
  // *lookahead_rows. fail_at_call: that Step call (0-based) fails. on_call: called with each Step
  // call's number first.
  FakeDeviceRunner(std::unique_ptr<model::ModelRunner> inner, std::map<std::int64_t, Seen>* seen,
                   bool lookahead = false, int* lookahead_rows = nullptr, int fail_at_call = -1,
                   std::function<void(int)> on_call = {})
      : inner_(std::move(inner)),
        seen_(seen),
        lookahead_(lookahead),
        lookahead_rows_(lookahead_rows),
        fail_at_call_(fail_at_call),
        on_call_(std::move(on_call)) {}
  const model::EngineConfig& config() const override { return inner_->config(); }
  std::int64_t num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  const char* device_name() const override { return "fake-device"; }
  std::int64_t memory_bytes() const override { return inner_->memory_bytes(); }
  bool supports_device_sampling() const override { return true; }
  bool supports_lookahead() const override { return lookahead_; }
  std::int32_t lookahead_min_sequences() const override { return min_sequences_; }
  void set_lookahead_min_sequences(std::int32_t n) { min_sequences_ = n; }

  Result<model::StepOutput> Step(const model::StepInput& input) override {
    std::vector<TokenIdType> previous = std::move(last_sampled_);
    last_sampled_.clear();
    if (on_call_) on_call_(calls_);
    if (calls_++ == fail_at_call_) return Internal("the fake device failed this step");
    model::StepInput host = input;
    bool any = false;
    for (model::SequenceStep& s : host.sequences) {
      if (s.previous_step_row >= 0) {
        // The default Launch runs Step at once, so the step launched just before is the last call.
        EXPECT_TRUE(lookahead_);
        EXPECT_EQ(s.tokens.size(), 1u);
        const auto row = static_cast<std::size_t>(s.previous_step_row);
        if (row >= previous.size() || previous[row] == -1) {
          return InvalidArgument("previous_step_row " + std::to_string(row) + " was not sampled");
        }
        s.tokens = {std::max<TokenIdType>(previous[row], 0)};  // an error code gives a valid id
        s.previous_step_row = -1;
        if (lookahead_rows_ != nullptr) ++*lookahead_rows_;
      }
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
    last_sampled_ = out.sampled_tokens;
    return out;
  }

 private:
  std::unique_ptr<model::ModelRunner> inner_;
  std::map<std::int64_t, Seen>* seen_;
  bool lookahead_;
  int* lookahead_rows_;
  int fail_at_call_;
  std::function<void(int)> on_call_;
  int calls_ = 0;
  std::int32_t min_sequences_ = 1;
  std::vector<TokenIdType> last_sampled_;  // the last step's samples, by sequence
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
  for (const Result<IdType>& id : ex.EnqueueAll(reqs)) {
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

// The same requests through the plain CPU runner (host sampling) and the fake device runner,
// without lookahead and with it.
struct Both {
  std::vector<Response> host, device, ahead;
  std::vector<IdType> device_ids;
  std::map<std::int64_t, FakeDeviceRunner::Seen> seen, seen_ahead;
  int lookahead_rows = 0;       // tokens the lookahead run's steps read from the step before
  KvCacheStats ahead_kv_after;  // the lookahead run's pool once every request is back
};

// `cfg` serves all three (the plain CPU runner never samples on the device).
Both RunBoth(const std::vector<Request>& reqs, ExecutorConfig cfg = {}) {
  Both b;
  auto host = MakeImpl(CpuRunner(), cfg);
  auto device = MakeImpl(std::make_unique<FakeDeviceRunner>(CpuRunner(), &b.seen), cfg);
  auto ahead = MakeImpl(
      std::make_unique<FakeDeviceRunner>(CpuRunner(), &b.seen_ahead, true, &b.lookahead_rows), cfg);
  if (!host || !device || !ahead) return b;
  b.host = RunAll(*host, reqs);
  b.device = RunAll(*device, reqs, &b.device_ids);
  b.ahead = RunAll(*ahead, reqs);
  b.ahead_kv_after = ahead->kv_cache_stats();
  return b;
}

// Same tokens, finish reason and (bit for bit: the same double arithmetic) log-probs.
void ExpectSameAs(const std::vector<Response>& run, const Both& b, std::size_t i,
                  const char* name) {
  ASSERT_FALSE(b.host[i].hasError()) << "request " << i << ": " << b.host[i].error->ToString();
  ASSERT_FALSE(run[i].hasError()) << name << " request " << i << ": " << run[i].error->ToString();
  EXPECT_EQ(run[i].result.output_token_ids.at(0), b.host[i].result.output_token_ids.at(0))
      << name << " request " << i;
  EXPECT_EQ(run[i].result.finish_reasons.at(0), b.host[i].result.finish_reasons.at(0))
      << name << " request " << i;
  EXPECT_EQ(run[i].result.log_probs, b.host[i].result.log_probs) << name << " request " << i;
  EXPECT_EQ(run[i].result.cum_log_probs, b.host[i].result.cum_log_probs)
      << name << " request " << i;
}

void ExpectSame(const Both& b, std::size_t i) {
  ExpectSameAs(b.device, b, i, "device");
  ExpectSameAs(b.ahead, b, i, "lookahead");
  // Every block back: no request's lookahead kept one.
  EXPECT_EQ(b.ahead_kv_after.free_num_blocks, b.ahead_kv_after.max_num_blocks);
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
  ASSERT_TRUE(b.ahead[0].hasError());
  EXPECT_EQ(b.ahead[0].error->ToString(), b.host[0].error->ToString());
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

TEST(DeviceSamplingLookahead, StepsReadTheirTokensFromTheStepBefore) {
  const std::vector<Request> reqs = {Make(61, 9), Sampled(62, 7, 0.9f, 8, 0.0f), Make(63, 1),
                                     Sampled(64, 12, 1.1f, 0, 0.8f)};
  const Both b = RunBoth(reqs);
  ASSERT_EQ(b.ahead.size(), reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) ExpectSame(b, i);
  // Every token after a request's first but its last came from the step before on the "device";
  // a token that ends a request by length is never looked ahead, so no draw is wasted.
  int expected_rows = 0;
  for (const Request& r : reqs) expected_rows += std::max(r.max_tokens - 1, 0);
  EXPECT_EQ(b.lookahead_rows, expected_rows);
  for (const auto& [id, seen] : b.seen_ahead) ExpectConsecutiveDraws(seen, 0);
}

// Steps of fewer sequences than the runner's lookahead_min_sequences complete before the next
// launch: a lone request is never looked ahead, three together are.
TEST(DeviceSamplingLookahead, OnlyStepsOfEnoughSequencesAreLookedAhead) {
  std::map<std::int64_t, FakeDeviceRunner::Seen> seen;
  int rows = 0;
  auto runner = std::make_unique<FakeDeviceRunner>(CpuRunner(), &seen, true, &rows);
  runner->set_lookahead_min_sequences(3);
  auto ex = MakeImpl(std::move(runner));
  ASSERT_TRUE(ex);
  auto host = MakeImpl(CpuRunner());
  ASSERT_TRUE(host);
  const std::vector<Request> alone = {Make(91, 8)};
  EXPECT_EQ(RunAll(*ex, alone)[0].result.output_token_ids,
            RunAll(*host, alone)[0].result.output_token_ids);
  EXPECT_EQ(rows, 0);
  const std::vector<Request> three = {Make(92, 8), Make(93, 8), Make(94, 8)};
  const std::vector<Response> want = RunAll(*host, three);
  const std::vector<Response> got = RunAll(*ex, three);
  for (std::size_t i = 0; i < three.size(); ++i) {
    EXPECT_EQ(got[i].result.output_token_ids, want[i].result.output_token_ids) << i;
  }
  EXPECT_GT(rows, 0);
}

TEST(DeviceSamplingLookahead, ACancelMidRunEndsOnlyThatRequestAndFreesItsBlocks) {
  const std::vector<Request> reqs = {Make(71, 40), Make(72, 30), Sampled(73, 35, 0.8f, 10, 0.0f)};
  std::map<std::int64_t, FakeDeviceRunner::Seen> seen;
  int rows = 0;
  // The cancel comes while Step call 6 runs (the default Launch runs it at once): request 0 is in
  // that step and in the one launched before it, whose tokens are not taken yet.
  Impl* executor = nullptr;
  IdType victim = 0;
  auto ex = MakeImpl(
      std::make_unique<FakeDeviceRunner>(CpuRunner(), &seen, true, &rows, -1, [&](int call) {
        if (call == 6) executor->Cancel(victim);
      }));
  ASSERT_TRUE(ex);
  executor = ex.get();
  auto host = MakeImpl(CpuRunner());
  ASSERT_TRUE(host);
  const std::vector<Response> want = RunAll(*host, reqs);
  // Ids are given in order from 1, so the first request's is known before it is enqueued.
  victim = 1;
  std::vector<IdType> ids;
  const std::vector<Response> got = RunAll(*ex, reqs, &ids);
  ASSERT_EQ(ids.at(0), victim);
  ASSERT_EQ(got.size(), reqs.size());
  ASSERT_TRUE(got[0].isFinal() && !got[0].hasError());
  EXPECT_EQ(got[0].result.finish_reasons.at(0), FinishReason::kCancelled);
  for (std::size_t i = 1; i < reqs.size(); ++i) {
    ASSERT_FALSE(got[i].hasError()) << got[i].error->ToString();
    EXPECT_EQ(got[i].result.finish_reasons.at(0), want[i].result.finish_reasons.at(0));
  }
  EXPECT_GT(rows, 0);
  const KvCacheStats kv = ex->kv_cache_stats();
  EXPECT_EQ(kv.free_num_blocks, kv.max_num_blocks);
}

TEST(DeviceSamplingLookahead, AFailedStepFailsItsRequestsAndTheNextStepsWork) {
  std::map<std::int64_t, FakeDeviceRunner::Seen> seen;
  int rows = 0;
  // Call 3 is a decode step with the next one already launched on its tokens.
  auto ex = MakeImpl(std::make_unique<FakeDeviceRunner>(CpuRunner(), &seen, true, &rows, 3));
  ASSERT_TRUE(ex);
  const std::vector<Response> first = RunAll(*ex, {Make(81, 8), Make(82, 8)});
  for (const Response& r : first) {
    ASSERT_TRUE(r.hasError());
    EXPECT_NE(r.error->ToString().find("the fake device failed this step"), std::string::npos)
        << r.error->ToString();
  }
  KvCacheStats kv = ex->kv_cache_stats();
  EXPECT_EQ(kv.free_num_blocks, kv.max_num_blocks);
  // The executor goes on: later requests run to the end, equal to the host path.
  auto host = MakeImpl(CpuRunner());
  ASSERT_TRUE(host);
  const std::vector<Request> later = {Make(83, 6), Sampled(84, 7, 0.9f, 5, 0.0f)};
  const std::vector<Response> want = RunAll(*host, later);
  const std::vector<Response> got = RunAll(*ex, later);
  for (std::size_t i = 0; i < later.size(); ++i) {
    ASSERT_FALSE(got[i].hasError()) << got[i].error->ToString();
    EXPECT_EQ(got[i].result.output_token_ids, want[i].result.output_token_ids);
  }
  kv = ex->kv_cache_stats();
  EXPECT_EQ(kv.free_num_blocks, kv.max_num_blocks);
}

}  // namespace
}  // namespace inflight
