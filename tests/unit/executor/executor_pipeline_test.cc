// The executor with micro-batches in flight, in one process: a runner that behaves as a pipeline
// of `depth` stages (Launch queues the step, Complete computes the oldest on the CPU runner, as the
// last stage would finish it) and checks, at every Launch, that no block of the new step belongs to
// another request's step still in flight (a block freed and handed out under the pipeline). Tokens
// must equal the executor's without micro-batches, and cancels that land while a request is in
// flight must leave every block free.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "inflight/executor.h"
#include "model/model_runner.h"
#include "unit/executor/run_requests.h"
#include "unit/executor/test_engine.h"

namespace inflight {
namespace {

const testing::TinyEngineOptions kOpts;

std::string Engine() {
  static const std::string dir = testing::TinyEngine(kOpts, "pipeline");
  return dir;
}

std::unique_ptr<model::ModelRunner> CpuRunner() {
  model::RunnerOptions o;
  o.max_kv_tokens = 64 * kOpts.tokens_per_block;
  auto r = model::CreateCpuModelRunner(Engine(), o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

struct PipelineLog {
  int max_in_flight = 0;
  int num_overlaps = 0;  // launches that named a block of another request's step in flight
};

class FakePipelineRunner final : public model::ModelRunner {
 public:
  // `stage_time`: how long Complete takes (the later stages' compute), so that a client thread
  // gets to act while steps are in flight.
  FakePipelineRunner(std::unique_ptr<model::ModelRunner> inner, std::int32_t depth,
                     std::shared_ptr<PipelineLog> log,
                     std::chrono::milliseconds stage_time = std::chrono::milliseconds(0))
      : inner_(std::move(inner)), depth_(depth), log_(std::move(log)), stage_time_(stage_time) {}
  const model::EngineConfig& config() const override { return inner_->config(); }
  std::int64_t num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  const char* device_name() const override { return "fake-pipeline"; }
  std::int64_t memory_bytes() const override { return inner_->memory_bytes(); }
  Result<model::StepOutput> Step(const model::StepInput& input) override {
    return inner_->Step(input);
  }
  std::int32_t max_steps_in_flight() const override { return depth_; }

  Status Launch(const model::StepInput& input) override {
    std::set<std::int64_t> seqs;
    for (const model::SequenceStep& s : input.sequences) {
      EXPECT_TRUE(seqs.insert(s.seq_id).second) << "sequence " << s.seq_id << " twice in a step";
      for (const model::StepInput& earlier : in_flight_) {
        for (const model::SequenceStep& e : earlier.sequences) {
          EXPECT_NE(e.seq_id, s.seq_id) << "sequence " << s.seq_id << " in two micro-batches";
          for (std::int32_t block : s.block_table) {
            if (e.seq_id != s.seq_id &&
                std::count(e.block_table.begin(), e.block_table.end(), block) > 0) {
              ++log_->num_overlaps;
              ADD_FAILURE() << "block " << block << " of sequence " << s.seq_id
                            << " is still in flight for sequence " << e.seq_id;
            }
          }
        }
      }
    }
    in_flight_.push_back(input);
    log_->max_in_flight = std::max(log_->max_in_flight, static_cast<int>(in_flight_.size()));
    EXPECT_LE(static_cast<int>(in_flight_.size()), depth_);
    return Status::Ok();
  }

  Result<model::StepOutput> Complete() override {
    if (in_flight_.empty()) return Internal("Complete without a launched step");
    model::StepInput oldest = std::move(in_flight_.front());
    in_flight_.pop_front();
    std::this_thread::sleep_for(stage_time_);
    return inner_->Step(oldest);
  }

 private:
  std::unique_ptr<model::ModelRunner> inner_;
  const std::int32_t depth_;
  std::shared_ptr<PipelineLog> log_;
  const std::chrono::milliseconds stage_time_;
  std::deque<model::StepInput> in_flight_;
};

// 16 requests of different lengths for 8 running at once: new ones are admitted (and take freed
// blocks) while others are in flight.
std::vector<Request> Requests() {
  std::vector<Request> out;
  for (std::uint32_t i = 0; i < 16; ++i) {
    out.push_back(testing::Greedy(testing::RandomPrompt(40 + i, 2 + 3 * i, kOpts.vocab_size),
                                  2 + static_cast<SizeType>(i % 5) * 3));
  }
  return out;
}

std::vector<VecTokens> Tokens(const std::vector<Response>& responses) {
  std::vector<VecTokens> out;
  for (const Response& r : responses) {
    EXPECT_FALSE(r.hasError()) << r.error->ToString();
    out.push_back(r.hasError() ? VecTokens{} : r.result.output_token_ids.front());
  }
  return out;
}

ExecutorConfig Config() {
  ExecutorConfig c;
  c.max_batch_size = 8;
  c.kv_cache_config.enable_block_reuse = false;  // shared prefix blocks would be legal overlaps
  return c;
}

std::vector<VecTokens> Reference() {
  auto ex = Executor::CreateWithRunner(Config(), CpuRunner());
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  return ex.ok() ? Tokens(testing::RunAll(**ex, Requests())) : std::vector<VecTokens>{};
}

TEST(ExecutorPipelineTest, MicroBatchesGiveTheTokensOfOneStepAtATime) {
  const std::vector<VecTokens> want = Reference();
  for (std::int32_t depth : {2, 3, 4}) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    auto log = std::make_shared<PipelineLog>();
    auto ex = Executor::CreateWithRunner(
        Config(), std::make_unique<FakePipelineRunner>(CpuRunner(), depth, log));
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    EXPECT_EQ(Tokens(testing::RunAll(**ex, Requests())), want);
    EXPECT_EQ(log->max_in_flight, depth);
    EXPECT_EQ(log->num_overlaps, 0);
    const KvCacheStats kv = (*ex)->getKvCacheStats();
    EXPECT_EQ(kv.free_num_blocks, kv.max_num_blocks);
  }
}

TEST(ExecutorPipelineTest, MicroBatchingOffKeepsOneStepInFlight) {
  auto log = std::make_shared<PipelineLog>();
  ExecutorConfig config = Config();
  config.enable_micro_batching = false;
  auto ex =
      Executor::CreateWithRunner(config, std::make_unique<FakePipelineRunner>(CpuRunner(), 3, log));
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  EXPECT_EQ(Tokens(testing::RunAll(**ex, Requests())), Reference());
  EXPECT_EQ(log->max_in_flight, 1);
}

// Streaming requests cancelled as their tokens arrive, so that most cancels find the request in a
// micro-batch in flight: its blocks must stay its own until that micro-batch is back, and all come
// back at the end.
TEST(ExecutorPipelineTest, CancelsMidPipelineFreeEveryBlockAndDisturbNoOne) {
  const std::vector<VecTokens> want = Reference();
  auto log = std::make_shared<PipelineLog>();
  auto ex = Executor::CreateWithRunner(
      Config(),
      std::make_unique<FakePipelineRunner>(CpuRunner(), 3, log, std::chrono::milliseconds(3)));
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<Request> reqs = Requests();
  std::vector<IdType> ids;
  for (Request& r : reqs) {
    r.streaming = true;
    auto id = (*ex)->enqueueRequest(r);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  const std::set<std::size_t> cancel{1, 4, 5, 8, 9, 12};
  std::map<std::size_t, VecTokens> got;
  std::map<std::size_t, FinishReason> reason;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (reason.size() < reqs.size() && std::chrono::steady_clock::now() < deadline) {
    for (const Response& r : (*ex)->awaitResponses(std::chrono::milliseconds(100))) {
      const auto i =
          static_cast<std::size_t>(std::find(ids.begin(), ids.end(), r.request_id) - ids.begin());
      ASSERT_LT(i, ids.size());
      ASSERT_FALSE(r.hasError()) << r.error->ToString();
      const VecTokens& piece = r.result.output_token_ids.front();
      got[i].insert(got[i].end(), piece.begin(), piece.end());
      if (cancel.count(i) > 0 && !r.result.is_final) (*ex)->cancelRequest(r.request_id);
      if (r.result.is_final) reason[i] = r.result.finish_reasons.front();
    }
  }
  ASSERT_EQ(reason.size(), reqs.size()) << "requests still running after 120 s";
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const VecTokens& tokens = got[i];
    ASSERT_LE(tokens.size(), want[i].size()) << "request " << i;
    EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), want[i].begin())) << "request " << i;
    if (cancel.count(i) == 0) {
      EXPECT_EQ(tokens, want[i]) << "request " << i;
    }
  }
  EXPECT_EQ(log->num_overlaps, 0);
  EXPECT_GE(log->max_in_flight, 2);
  const KvCacheStats kv = (*ex)->getKvCacheStats();
  EXPECT_EQ(kv.free_num_blocks, kv.max_num_blocks);
  EXPECT_EQ(kv.used_num_blocks, 0);
}

}  // namespace
}  // namespace inflight
