// The executor over a pipeline-parallel engine in leader mode, as the backend runs it (mpirun -n 2:
// pp 2; -n 4: pp 4 and tp 2 x pp 2): rank 0's executor steps a LeaderRunner, the other ranks sit in
// RunFollower. With micro-batches in flight and without, greedy tokens must equal the whole
// engine's (tp 1, in one process), and requests cancelled or finished while micro-batches are in
// the pipeline must leave every KV block free.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "inflight/executor.h"
#include "model/leader_runner.h"
#include "model/mpi_load_report.h"
#include "model/mpi_step_channel.h"
#include "mpi_world.h"
#include "split_cpu_runner.h"
#include "unit/executor/run_requests.h"
#include "unit/model_cpu/test_engine.h"

namespace inflight::model {
namespace {

using inflight::testing::mpi_world::AllRanks;
using inflight::testing::mpi_world::ShareString;
using inflight::testing::mpi_world::WorldRank;
using inflight::testing::mpi_world::WorldSize;

using inflight::testing::Greedy;
using inflight::testing::RandomPrompt;
using inflight::testing::RunAll;
using testing::TestEngine;

constexpr std::int32_t kTokensPerBlock = 4;
constexpr std::int64_t kKvTokens = std::int64_t{96} * kTokensPerBlock;
constexpr std::int64_t kVocab = 997;

// Llama, 4 layers (a stage of one layer at pp 4) of 4 heads (2 kv heads).
RandomCheckpointOptions Options() {
  RandomCheckpointOptions o;
  o.arch = "llama";
  o.hidden_size = 128;
  o.num_layers = 4;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.intermediate_size = 256;
  o.vocab_size = kVocab;
  o.max_position_embeddings = 64;
  o.init_std = 0.1;
  o.seed = 29;
  return o;
}

struct Layout {
  std::int32_t tp, pp;
};

std::vector<Layout> PipelineLayouts() {
  switch (WorldSize()) {
    case 2:
      return {{1, 2}};
    case 4:
      return {{1, 4}, {2, 2}};
    default:
      return {};
  }
}

// Seven requests of different lengths, so that micro-batches change as requests finish.
std::vector<Request> Requests() {
  std::vector<Request> out;
  for (std::uint32_t i = 0; i < 7; ++i) {
    out.push_back(Greedy(RandomPrompt(100 + i, 3 + 2 * i, kVocab), 3 + static_cast<SizeType>(i)));
  }
  return out;
}

// Four long streaming requests; the test cancels two of them once they are under way.
std::vector<Request> LongRequests() {
  std::vector<Request> out;
  for (std::uint32_t i = 0; i < 4; ++i) {
    Request r = Greedy(RandomPrompt(200 + i, 6, kVocab), 40);
    r.streaming = true;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<VecTokens> Tokens(const std::vector<Response>& responses) {
  std::vector<VecTokens> out;
  for (const Response& r : responses) {
    EXPECT_FALSE(r.hasError()) << r.error->ToString();
    out.push_back(r.hasError() || r.result.output_token_ids.empty()
                      ? VecTokens{}
                      : r.result.output_token_ids.front());
  }
  return out;
}

// The leader's runner as the executor sees it, counting the steps launched and not yet completed,
// to show that micro-batches were really in flight together.
class InFlightCounter final : public ModelRunner {
 public:
  InFlightCounter(std::unique_ptr<ModelRunner> inner, std::shared_ptr<int> max_in_flight)
      : inner_(std::move(inner)), max_in_flight_(std::move(max_in_flight)) {}
  const EngineConfig& config() const override { return inner_->config(); }
  std::int64_t num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  const char* device_name() const override { return inner_->device_name(); }
  std::int64_t memory_bytes() const override { return inner_->memory_bytes(); }
  Result<StepOutput> Step(const StepInput& input) override { return inner_->Step(input); }
  std::int32_t max_steps_in_flight() const override { return inner_->max_steps_in_flight(); }
  Status Launch(const StepInput& input) override {
    RETURN_IF_ERROR(inner_->Launch(input));
    *max_in_flight_ = std::max(*max_in_flight_, ++in_flight_);
    return Status::Ok();
  }
  Result<StepOutput> Complete() override {
    --in_flight_;
    return inner_->Complete();
  }

 private:
  std::unique_ptr<ModelRunner> inner_;
  std::shared_ptr<int> max_in_flight_;  // read by the test after the executor is gone
  int in_flight_ = 0;
};

ExecutorConfig Config(bool micro_batching) {
  ExecutorConfig c;
  c.enable_micro_batching = micro_batching;
  c.max_batch_size = 8;
  c.kv_cache_config.enable_block_reuse = false;
  return c;
}

// Streams LongRequests, cancels requests 1 and 2 after their third token and returns every
// request's tokens (streamed pieces joined) with whether it ended cancelled.
struct StreamOutcome {
  std::vector<VecTokens> tokens;
  std::vector<bool> cancelled;
};
StreamOutcome StreamAndCancel(Executor& ex) {
  const std::vector<Request> reqs = LongRequests();
  std::vector<IdType> ids;
  for (const Request& r : reqs) {
    auto id = ex.enqueueRequest(r);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(id.ok() ? *id : 0);
  }
  StreamOutcome out;
  out.tokens.resize(reqs.size());
  out.cancelled.assign(reqs.size(), false);
  std::set<std::size_t> done, cancel_sent;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (done.size() < reqs.size() && std::chrono::steady_clock::now() < deadline) {
    for (const Response& r : ex.awaitResponses(std::chrono::milliseconds(100))) {
      const std::size_t i =
          static_cast<std::size_t>(std::find(ids.begin(), ids.end(), r.request_id) - ids.begin());
      EXPECT_LT(i, ids.size());
      if (i >= ids.size()) continue;
      EXPECT_FALSE(r.hasError()) << r.error->ToString();
      if (r.hasError()) {
        done.insert(i);
        continue;
      }
      if (!r.result.output_token_ids.empty()) {
        const VecTokens& piece = r.result.output_token_ids.front();
        out.tokens[i].insert(out.tokens[i].end(), piece.begin(), piece.end());
      }
      if ((i == 1 || i == 2) && out.tokens[i].size() >= 3 && cancel_sent.insert(i).second) {
        ex.cancelRequest(ids[i]);
      }
      if (r.isFinal()) {
        done.insert(i);
        out.cancelled[i] = r.result.finish_reasons.size() == 1 &&
                           r.result.finish_reasons.front() == FinishReason::kCancelled;
      }
    }
  }
  EXPECT_EQ(done.size(), reqs.size()) << "requests still running after 120 s";
  return out;
}

class MpiExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (WorldRank() != 0) return;
    std::string error;
    auto whole = TestEngine::Make(Options(), DType::kFloat32, kTokensPerBlock, &error);
    ASSERT_NE(whole, nullptr) << error;
    auto ex = Executor::CreateWithRunner(Config(false), whole->Runner(kKvTokens, 1));
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    reference_ = new std::vector<VecTokens>(Tokens(RunAll(**ex, Requests())));
    reference_long_ = new std::vector<VecTokens>(Tokens(RunAll(**ex, [] {
      std::vector<Request> r = LongRequests();
      for (Request& x : r) x.streaming = false;
      return r;
    }())));
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete reference_long_;
    reference_ = reference_long_ = nullptr;
  }
  static std::vector<VecTokens>* reference_;
  static std::vector<VecTokens>* reference_long_;
};
std::vector<VecTokens>* MpiExecutorTest::reference_ = nullptr;
std::vector<VecTokens>* MpiExecutorTest::reference_long_ = nullptr;

TEST_F(MpiExecutorTest, MicroBatchedPipelineGivesTheWholeEnginesTokens) {
  const std::vector<Layout> layouts = PipelineLayouts();
  if (layouts.empty()) GTEST_SKIP() << "not at this world size";
  const int rank = WorldRank();
  ASSERT_TRUE(AllRanks(rank != 0 || reference_ != nullptr)) << "rank 0 has no reference";

  for (const Layout& l : layouts) {
    std::unique_ptr<TestEngine> engine;
    std::string error;
    if (rank == 0) {
      engine = TestEngine::Make(Options(), DType::kFloat32, kTokensPerBlock, &error, l.tp, l.pp);
      EXPECT_NE(engine, nullptr) << error;
    }
    const std::string dir = ShareString(engine != nullptr ? engine->engine_dir() : "");
    ASSERT_FALSE(dir.empty()) << "rank 0 could not build the engine";
    for (const bool micro : {true, false}) {
      const std::string name = "tp " + std::to_string(l.tp) + " x pp " + std::to_string(l.pp) +
                               (micro ? ", micro-batches" : ", one step at a time");
      SCOPED_TRACE(name);
      auto split = testing::MakeSplitCpuRunner(dir, l.tp, l.pp, kKvTokens, 120);
      EXPECT_TRUE(split.ok()) << split.status().ToString();
      ASSERT_TRUE(AllRanks(split.ok()));
      const Result<std::int64_t> blocks =
          GatherLoadResults(MPI_COMM_WORLD, Result<std::int64_t>(split->runner->num_kv_blocks()));
      ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
      MPI_Comm step_comm = MPI_COMM_NULL;
      MPI_Comm_dup(MPI_COMM_WORLD, &step_comm);
      auto channel = std::make_unique<MpiStepChannel>(step_comm, std::chrono::seconds(120));

      if (rank != 0) {
        const Status followed = RunFollower(split->runner.get(), *channel);
        EXPECT_TRUE(followed.ok()) << followed.ToString();
      } else {
        auto leader =
            std::make_unique<LeaderRunner>(std::move(split->runner), std::move(channel), *blocks);
        EXPECT_EQ(leader->max_steps_in_flight(), l.pp);
        auto max_in_flight = std::make_shared<int>(0);
        auto ex = Executor::CreateWithRunner(
            Config(micro), std::make_unique<InFlightCounter>(std::move(leader), max_in_flight));
        EXPECT_TRUE(ex.ok()) << ex.status().ToString();
        if (ex.ok()) {
          EXPECT_EQ(Tokens(RunAll(**ex, Requests())), *reference_);
          // Several micro-batches were in flight: iterations of more than one micro-batch id, and
          // every micro-batch under the whole batch.
          std::set<std::int64_t> micro_batch_ids;
          for (const IterationStats& st : (*ex)->getLatestIterationStats()) {
            if (st.num_scheduled_requests > 0) micro_batch_ids.insert(st.micro_batch_id);
          }
          EXPECT_EQ(micro_batch_ids.size(), micro ? static_cast<std::size_t>(l.pp) : 1u);

          const StreamOutcome streamed = StreamAndCancel(**ex);
          for (std::size_t i = 0; i < streamed.tokens.size(); ++i) {
            const VecTokens& want = (*reference_long_)[i];
            if (i == 1 || i == 2) {
              EXPECT_TRUE(streamed.cancelled[i]) << "request " << i << " was not cancelled";
              ASSERT_LE(streamed.tokens[i].size(), want.size());
              EXPECT_TRUE(
                  std::equal(streamed.tokens[i].begin(), streamed.tokens[i].end(), want.begin()))
                  << "request " << i;
            } else {
              EXPECT_EQ(streamed.tokens[i], want) << "request " << i;
            }
          }
          // Every block is back: the cancelled requests' too, freed once their micro-batch was.
          const KvCacheStats kv = (*ex)->getKvCacheStats();
          EXPECT_EQ(kv.free_num_blocks, kv.max_num_blocks);
          EXPECT_EQ(kv.used_num_blocks, 0);
        }
        // A full pipeline at some point (seven requests: more than pp micro-batches' worth), and
        // never more than pp_size steps in flight.
        EXPECT_EQ(*max_in_flight, micro ? l.pp : 1);
        // `ex` goes here: the LeaderRunner's destructor sends stop, so the followers return.
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the files before rank 0 removes them
  }
}

}  // namespace
}  // namespace inflight::model
