// The executor end to end on the CPU runner: a tiny random-weight engine, real scheduling, paging
// and sampling. Outputs are checked against an independent greedy decode that recomputes every
// prefix from scratch, and against each other under batching, streaming, chunking, pausing and
// prefix reuse.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <thread>

#include "executor/executor_impl.h"
#include "executor/sampling/sampler.h"
#include "inflight/executor.h"
#include "model/model_runner.h"
#include "unit/executor/run_requests.h"
#include "unit/executor/test_engine.h"

namespace inflight {
namespace {

using std::chrono::milliseconds;
using testing::Greedy;
using testing::RunAll;
using testing::RunAllTogether;

const testing::TinyEngineOptions kOpts;

std::string Engine() {
  static const std::string dir = testing::TinyEngine(kOpts, "exec");
  return dir;
}

VecTokens Prompt(std::uint32_t seed, std::size_t len) {
  return testing::RandomPrompt(seed, len, kOpts.vocab_size);
}

std::unique_ptr<Executor> Make(ExecutorConfig cfg = {}) {
  auto ex = Executor::Create(Engine(), cfg);
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  return ex.ok() ? std::move(ex).value() : nullptr;
}

// Greedy tokens by recomputing the whole sequence every step on a fresh runner: no KV reuse across
// steps.
VecTokens ReferenceGreedy(const VecTokens& prompt, int n, std::optional<TokenIdType> end_id = {}) {
  model::RunnerOptions o;
  o.max_kv_tokens = 256;
  auto runner = model::CreateCpuModelRunner(Engine(), o);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  VecTokens seq = prompt, out;
  for (int i = 0; i < n; ++i) {
    model::SequenceStep s;
    s.tokens = seq;
    s.num_cached = 0;
    const int blocks =
        (static_cast<int>(seq.size()) + kOpts.tokens_per_block - 1) / kOpts.tokens_per_block;
    s.block_table.resize(static_cast<std::size_t>(blocks));
    std::iota(s.block_table.rbegin(), s.block_table.rend(), 0);  // non-monotonic on purpose
    model::StepInput in;
    in.sequences.push_back(s);
    auto step = (*runner)->Step(in);
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    const TokenIdType t = sampling::Argmax(step->logits);
    if (end_id && t == *end_id) break;
    seq.push_back(t);
    out.push_back(t);
  }
  return out;
}

void ExpectAllBlocksFree(Executor& ex) {
  const KvCacheStats kv = ex.getKvCacheStats();
  EXPECT_EQ(kv.free_num_blocks, kv.max_num_blocks);
  EXPECT_EQ(kv.used_num_blocks, 0);
}

TEST(Executor, GreedyMatchesFromScratchRecompute) {
  ASSERT_EQ(Engine().rfind("error", 0), std::string::npos) << Engine();
  auto ex = Make();
  ASSERT_TRUE(ex);
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    const VecTokens prompt = Prompt(seed, 5 + seed * 7);
    auto res = RunAll(*ex, {Greedy(prompt, 12)});
    ASSERT_FALSE(res[0].hasError()) << res[0].error->ToString();
    EXPECT_EQ(res[0].result.output_token_ids.at(0), ReferenceGreedy(prompt, 12)) << "seed " << seed;
    EXPECT_EQ(res[0].result.finish_reasons.at(0), FinishReason::kLength);
  }
  ExpectAllBlocksFree(*ex);
}

TEST(Executor, DeviceNameSaysWhereTheModelRuns) {
  ExecutorConfig cfg;
  cfg.device = DeviceKind::kCpu;
  auto ex = Make(cfg);
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->deviceName(), "cpu");
}

TEST(Executor, BatchedStreamedChunkedPausedAllAgree) {
  std::vector<Request> reqs;
  for (std::uint32_t i = 0; i < 12; ++i)
    reqs.push_back(Greedy(Prompt(100 + i, 3 + (i * 13) % 60), 10));
  std::vector<VecTokens> alone;
  {
    auto ex = Make();
    for (const Request& r : reqs)
      alone.push_back(RunAll(*ex, {r})[0].result.output_token_ids.at(0));
  }
  // All at once, in-flight batching.
  {
    auto ex = Make();
    auto res = RunAll(*ex, reqs);
    for (std::size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(res[i].result.output_token_ids.at(0), alone[i]) << i;
    ExpectAllBlocksFree(*ex);
  }
  // Streaming: the pieces concatenate to the same output; every piece but the last holds one token.
  {
    auto ex = Make();
    std::vector<Request> streamed = reqs;
    for (auto& r : streamed) r.streaming = true;
    std::map<IdType, std::vector<Response>> all;
    auto res = RunAll(*ex, streamed, &all);
    std::size_t i = 0;
    for (auto& [id, pieces] : all) {
      VecTokens joined;
      for (const Response& p : pieces) {
        ASSERT_FALSE(p.hasError());
        const auto& t = p.result.output_token_ids.at(0);
        if (!p.isFinal()) {
          EXPECT_EQ(t.size(), 1u);
        }
        joined.insert(joined.end(), t.begin(), t.end());
      }
      EXPECT_EQ(joined, alone[i++]);
    }
  }
  // Chunked context with a small token budget.
  {
    ExecutorConfig cfg;
    cfg.max_num_tokens = 16;
    cfg.scheduler_config.enable_chunked_context = true;
    auto ex = Make(cfg);
    auto res = RunAll(*ex, reqs);
    for (std::size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(res[i].result.output_token_ids.at(0), alone[i]) << i;
    ExpectAllBlocksFree(*ex);
  }
  // max_utilization with a KV cache far too small for all of them: pauses, same outputs.
  {
    ExecutorConfig cfg;
    cfg.scheduler_config.policy = CapacitySchedulerPolicy::kMaxUtilization;
    cfg.kv_cache_config.max_tokens = 96;
    cfg.kv_cache_config.enable_block_reuse = true;
    auto ex = Make(cfg);
    // Together: enqueued one by one on a loaded machine, each could finish before the next came,
    // and nothing would pause (seen once in a fresh-clone run).
    auto res = RunAllTogether(*ex, reqs);
    std::int64_t paused = 0;
    for (const IterationStats& s : ex->getLatestIterationStats())
      paused = std::max(paused, s.num_paused_requests);
    EXPECT_GT(paused, 0) << "the tiny cache should have forced pauses";
    for (std::size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(res[i].result.output_token_ids.at(0), alone[i]) << i;
    ExpectAllBlocksFree(*ex);
  }
}

TEST(Executor, SecondIdenticalPromptReusesBlocks) {
  auto ex = Make();
  const VecTokens prompt = Prompt(7, 40);
  auto first = RunAll(*ex, {Greedy(prompt, 4)})[0];
  auto second = RunAll(*ex, {Greedy(prompt, 4)})[0];
  EXPECT_EQ(first.result.kv_cache_reused_blocks, 0);
  // 40 prompt tokens in blocks of 4: at most (40 - 1) / 4 = 9 full blocks can be reused.
  EXPECT_EQ(second.result.kv_cache_reused_blocks, 9);
  EXPECT_EQ(first.result.output_token_ids, second.result.output_token_ids);
  EXPECT_GT(ex->getKvCacheStats().reused_blocks, 0);
}

// Takes at least 20 ms a step, so that a cancel sent after the first token always lands in the
// middle of a 100-token generation, however loaded the machine is (the tiny model alone makes 100
// tokens in about a millisecond).
class SlowRunner final : public model::ModelRunner {
 public:
  explicit SlowRunner(std::unique_ptr<model::ModelRunner> inner) : inner_(std::move(inner)) {}
  const model::EngineConfig& config() const override { return inner_->config(); }
  std::int64_t num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  const char* device_name() const override { return inner_->device_name(); }
  std::int64_t memory_bytes() const override { return inner_->memory_bytes(); }
  Result<model::StepOutput> Step(const model::StepInput& input) override {
    std::this_thread::sleep_for(milliseconds(20));
    return inner_->Step(input);
  }

 private:
  std::unique_ptr<model::ModelRunner> inner_;
};

TEST(Executor, CancelFreesBlocksAndEndsWithCancelled) {
  model::RunnerOptions o;
  o.max_kv_tokens = 2048;
  auto inner = model::CreateCpuModelRunner(Engine(), o);
  ASSERT_TRUE(inner.ok()) << inner.status().ToString();
  auto created =
      Executor::Impl::CreateWithRunner({}, std::make_unique<SlowRunner>(std::move(inner).value()));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Executor::Impl& ex = **created;
  // A neighbour that must finish normally whatever happens to the cancelled request.
  Request neighbour = Greedy(Prompt(8, 12), 30);
  Request r = Greedy(Prompt(9, 20), 100);
  r.streaming = true;
  auto other = ex.Enqueue(neighbour);
  auto id = ex.Enqueue(r);
  ASSERT_TRUE(id.ok() && other.ok());
  std::map<IdType, std::vector<Response>> all;
  bool cancelled = false;
  std::size_t finals = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finals < 2 && std::chrono::steady_clock::now() < deadline) {
    for (Response& resp : ex.Await(std::nullopt, milliseconds(100))) {
      ASSERT_FALSE(resp.hasError());
      finals += resp.isFinal();
      // Cancel mid-stream: after the request's first token.
      if (!cancelled && resp.request_id == *id) {
        ex.Cancel(*id);
        cancelled = true;
      }
      all[resp.request_id].push_back(resp);
    }
  }
  std::size_t tokens = 0;
  for (const Response& p : all[*id]) tokens += p.result.output_token_ids.at(0).size();
  ASSERT_FALSE(all[*id].empty());
  EXPECT_EQ(all[*id].back().result.finish_reasons.at(0), FinishReason::kCancelled);
  EXPECT_LT(tokens, 100u);
  ASSERT_FALSE(all[*other].empty());
  EXPECT_EQ(all[*other].back().result.output_token_ids.at(0),
            ReferenceGreedy(neighbour.input_token_ids, 30));
  const KvCacheStats kv = ex.kv_cache_stats();
  EXPECT_EQ(kv.free_num_blocks, kv.max_num_blocks);
  EXPECT_EQ(kv.used_num_blocks, 0);
}

TEST(Executor, InvalidRequestsNameTheFieldAndLeaveOthersAlone) {
  auto ex = Make();
  const auto message = [&](Request r) {
    auto id = ex->enqueueRequest(r);
    return id.ok() ? std::string("accepted") : id.status().message();
  };
  EXPECT_EQ(message(Greedy({}, 4)),
            "input_token_ids is empty: a request needs at least one prompt token");
  EXPECT_EQ(message(Greedy(Prompt(1, 97), 4)),
            "input length 97 exceeds max_input_len 96 of the engine");
  EXPECT_EQ(message(Greedy({1, 2, 97}, 4)), "input_ids[2] = 97 is outside the vocabulary [0, 97)");
  EXPECT_EQ(message(Greedy({1, 2}, 0)), "request_output_len 0 is not accepted: must be >= 1");
  EXPECT_NE(message(Greedy(Prompt(1, 90), 60)).find("exceeds max_seq_len"), std::string::npos);
  Request beam = Greedy({1, 2}, 3);
  beam.sampling_config.beam_width = 4;
  EXPECT_NE(message(beam).find("beam search is not implemented yet"), std::string::npos);
  // A good request still runs.
  auto res = RunAll(*ex, {Greedy({1, 2, 3}, 3)});
  EXPECT_FALSE(res[0].hasError());
  EXPECT_EQ(res[0].result.output_token_ids.at(0).size(), 3u);
}

TEST(Executor, EnqueueRequestsAdmitsTheBatchInOneStep) {
  auto ex = Make();
  // Repeated so that a loop thread racing per-request enqueues would show up at least once.
  for (int round = 0; round < 20; ++round) {
    std::vector<Request> reqs;
    for (std::uint32_t i = 0; i < 6; ++i) reqs.push_back(Greedy(Prompt(100 + i, 5), 2));
    reqs.insert(reqs.begin() + 3, Greedy({}, 2));  // invalid: refused alone
    std::vector<Result<IdType>> ids = ex->enqueueRequests(reqs);
    ASSERT_EQ(ids.size(), reqs.size());
    for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i].ok(), i != 3) << i;
    std::size_t finals = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (finals < 6 && std::chrono::steady_clock::now() < deadline) {
      for (const Response& r : ex->awaitResponses(milliseconds(100))) {
        EXPECT_FALSE(r.hasError()) << r.error->ToString();
        finals += r.isFinal() ? 1 : 0;
      }
    }
    ASSERT_EQ(finals, 6u);
    std::int64_t first_context = -1;
    for (const IterationStats& s : ex->getLatestIterationStats()) {
      if (s.num_context_requests > 0) {
        first_context = s.num_context_requests;
        break;
      }
    }
    EXPECT_EQ(first_context, 6) << "round " << round
                                << ": the first step took only part of the batch";
  }
}

TEST(Executor, SeedReproducibleAndEndIdStops) {
  auto ex = Make();
  Request r = Greedy(Prompt(5, 8), 24);
  r.sampling_config.temperature = 1.0f;
  r.sampling_config.top_k = 20;
  r.sampling_config.seed = 42;
  auto a = RunAll(*ex, {r, r});
  EXPECT_EQ(a[0].result.output_token_ids, a[1].result.output_token_ids);
  Request other = r;
  other.sampling_config.seed = 43;
  auto b = RunAll(*ex, {other});
  EXPECT_NE(a[0].result.output_token_ids, b[0].result.output_token_ids);
  // end_id: the greedy output's third token ends generation before it; the end id is not in the
  // output.
  const VecTokens greedy = ReferenceGreedy(Prompt(5, 8), 6);
  Request e = Greedy(Prompt(5, 8), 6);
  e.end_id = greedy.at(2);
  auto res = RunAll(*ex, {e});
  // The end id may occur earlier than position 2 if the first tokens repeat it.
  EXPECT_EQ(res[0].result.output_token_ids.at(0), ReferenceGreedy(Prompt(5, 8), 6, greedy.at(2)));
  EXPECT_EQ(res[0].result.finish_reasons.at(0), FinishReason::kEndId);
}

TEST(Executor, LogProbsAndLogitsHaveTheContractShapes) {
  auto ex = Make();
  Request r = Greedy(Prompt(3, 10), 5);
  r.output_config.return_log_probs = true;
  r.output_config.return_context_logits = true;
  r.output_config.return_generation_logits = true;
  auto res = RunAll(*ex, {r})[0];
  ASSERT_FALSE(res.hasError());
  const ResponseResult& o = res.result;
  ASSERT_EQ(o.log_probs.size(), 1u);
  EXPECT_EQ(o.log_probs[0].size(), 5u);
  float sum = 0;
  for (float lp : o.log_probs[0]) {
    EXPECT_LE(lp, 0.0f);
    EXPECT_LT(lp, -1e-7f) << "greedy log-probs are real, not 0";
    sum += lp;
  }
  EXPECT_NEAR(o.cum_log_probs.at(0), sum, 1e-4);
  EXPECT_EQ(o.context_logits.size(), 10u * o.vocab_size);
  EXPECT_EQ(o.generation_logits.size(), 5u * o.vocab_size);
  // The argmax of each generation-logits row is the token generated there (greedy).
  for (std::size_t i = 0; i < 5; ++i) {
    std::span<const float> row(o.generation_logits.data() + i * o.vocab_size, o.vocab_size);
    EXPECT_EQ(sampling::Argmax(row), o.output_token_ids[0][i]);
  }
}

TEST(Executor, StaticBatchingRunsABatchToCompletion) {
  ExecutorConfig cfg;
  cfg.batching_type = BatchingType::kStatic;
  auto ex = Make(cfg);
  std::vector<Request> reqs;
  for (std::uint32_t i = 0; i < 5; ++i) reqs.push_back(Greedy(Prompt(200 + i, 6 + i), 4 + i));
  auto res = RunAll(*ex, reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(res[i].result.output_token_ids.at(0),
              ReferenceGreedy(reqs[i].input_token_ids, reqs[i].max_tokens));
  }
  ExpectAllBlocksFree(*ex);
}

TEST(Executor, FullQueueRejectsWithNvidiasMessageAndRunsTheRest) {
  model::RunnerOptions o;
  o.max_kv_tokens = 2048;
  auto inner = model::CreateCpuModelRunner(Engine(), o);
  ASSERT_TRUE(inner.ok()) << inner.status().ToString();
  ExecutorConfig cfg;
  cfg.max_batch_size = 1;  // one request runs; the others wait, so the queue fills
  cfg.max_queue_size = 2;
  // The slow runner keeps the running request busy for at least 20 ms a token, so the ten enqueues
  // below always find the queue full.
  auto created =
      Executor::Impl::CreateWithRunner(cfg, std::make_unique<SlowRunner>(std::move(inner).value()));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Executor::Impl& ex = **created;
  std::vector<IdType> accepted;
  int rejected = 0;
  for (int i = 0; i < 10; ++i) {
    auto id = ex.Enqueue(Greedy(Prompt(300 + i, 8), 3));
    if (id.ok()) {
      accepted.push_back(*id);
    } else {
      ++rejected;
      EXPECT_EQ(id.status().code(), StatusCode::kUnavailable);
      EXPECT_EQ(id.status().message(),
                "Maximum queue size of 2 has been reached, please try again later");
    }
  }
  // At most one running and two waiting when the later ones arrive.
  EXPECT_GE(rejected, 1);
  EXPECT_LE(accepted.size(), 9u);
  std::size_t finished = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (finished < accepted.size() && std::chrono::steady_clock::now() < deadline) {
    for (Response& r : ex.Await(std::nullopt, milliseconds(100))) {
      EXPECT_FALSE(r.hasError());
      finished += r.isFinal();
    }
  }
  EXPECT_EQ(finished, accepted.size());
  const KvCacheStats kv = ex.kv_cache_stats();
  EXPECT_EQ(kv.free_num_blocks, kv.max_num_blocks);
}

TEST(Executor, ShutdownAnswersPendingRequests) {
  auto ex = Make();
  auto id = ex->enqueueRequest(Greedy(Prompt(4, 20), 100));
  ASSERT_TRUE(id.ok());
  ex->shutdown();
  bool final_seen = false;
  for (Response& r : ex->awaitResponses(milliseconds(1000))) final_seen |= r.isFinal();
  EXPECT_TRUE(final_seen);
  EXPECT_FALSE(ex->enqueueRequest(Greedy({1}, 1)).ok());
}

}  // namespace
}  // namespace inflight
