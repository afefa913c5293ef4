// The executor's engine room: one iteration thread runs schedule → model step → sample → respond.
// Client threads only touch the queues under mu_; the scheduler, block manager, runner and request
// states belong to the iteration thread alone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "executor/device_sampling_inputs.h"
#include "executor/request_state.h"
#include "executor/scheduler.h"
#include "executor/step_profile.h"
#include "inflight/executor.h"
#include "kv_cache/block_manager.h"
#include "model/model_runner.h"

namespace inflight {

class Executor::Impl {
 public:
  static Result<std::unique_ptr<Impl>> Create(const std::string& engine_dir,
                                              const ExecutorConfig& config);
  // Over a runner the caller made (tests: a fake runner); limits from the runner's engine config.
  static Result<std::unique_ptr<Impl>> CreateWithRunner(const ExecutorConfig& config,
                                                        std::unique_ptr<model::ModelRunner> runner);
  ~Impl();

  Result<IdType> Enqueue(const Request& request);
  // Enqueue for each request, the valid ones under one lock (Executor::enqueueRequests).
  std::vector<Result<IdType>> EnqueueAll(const std::vector<Request>& requests);
  std::vector<Response> Await(std::optional<IdType> id,
                              std::optional<std::chrono::milliseconds> timeout);
  void Cancel(IdType id);
  std::deque<IterationStats> TakeIterationStats();
  KvCacheStats kv_cache_stats() const;
  SizeType vocab_size() const { return static_cast<SizeType>(runner_->config().vocab_size); }
  SizeType max_batch_size() const { return limits_.max_batch_size; }
  std::string device_name() const { return runner_->device_name(); }
  bool accepting() const;
  void Shutdown();

 private:
  Impl(ExecutorConfig config, std::unique_ptr<model::ModelRunner> runner,
       executor::SchedulerLimits limits);
  Status Validate(const Request& request) const;
  // Queues a validated request; mu_ is held.
  Result<IdType> EnqueueLocked(const Request& request);
  void Loop();
  // The loop's wait for work (spinning first while busy_poll_ and within 20 ms of its last work);
  // false at shutdown.
  bool WaitForWork();
  // Moves new requests and cancellations from the client queues into the scheduler.
  void AdmitAndCancel();
  // Launches micro-batches while the pipeline has room (one at a time without micro-batching),
  // then completes the oldest. With lookahead: RunStepAhead.
  void RunStep();
  // Lookahead (executor_lookahead.cc): the step in flight gives its sequences' progress to the
  // next step (LookAhead), which is launched before the step in flight is completed, so the host's
  // work between steps overlaps the device's.
  void RunStepAhead();
  // Looks ahead every item of the newest step in flight that can go on without its token
  // reaching the host: prompt chunks, and device-sampled tokens whose next sampling inputs do not
  // read the tokens. False when an item that goes on after the step needs its token first (host
  // sampling, penalties, bad words): then the step completes before the next launch.
  bool LookAheadStep();
  // Ends the request with `reason` (error: fails it) now, or, while a step in flight still
  // computes it (lookahead), when that step is back: its work there is discarded.
  void EndRequest(executor::RequestState& state, FinishReason reason, const Status& error);
  // A request whose end was held (EndRequest, a held cancel): ends it once no step computes it.
  // True when the item's output is to be skipped.
  bool ApplyHeldEnd(executor::RequestState& state);
  // Schedules and launches one micro-batch; false when nothing could be scheduled.
  bool LaunchStep();
  // Completes the oldest micro-batch in flight: samples, responds, applies held-back cancels.
  void CompleteStep();
  // Completes every micro-batch in flight and drops their outputs (shutdown).
  void DrainInFlight();
  // Samples the next token of one scheduled item on the host, then AcceptToken.
  void SampleItem(executor::RequestState& state, std::span<const float> row);
  // The request's next token, sampled on the host or the device: stop criteria, append, respond.
  // `row` is the logits row it came from (empty when the device sampled it); `now_ns` the token's
  // time (SteadyNowNs).
  void AcceptToken(executor::RequestState& state, TokenIdType token, float log_prob,
                   std::span<const float> row, std::int64_t now_ns);
  // The device-sampling inputs of the request's next token (device_sampling_inputs.h); consumes
  // its next draw, as sampling::Sample would.
  model::DeviceSampling MakeDeviceSampling(executor::RequestState& state);
  // A device-sampled token, or the error code of a row the device could not sample.
  void AcceptDeviceToken(executor::RequestState& state, TokenIdType token, float log_prob,
                         std::int64_t vocab, std::int64_t now_ns);
  void CollectContextLogits(executor::RequestState& state, const executor::ScheduledItem& item,
                            std::span<const float> rows);
  void FinishRequest(executor::RequestState& state, FinishReason reason);
  void FailRequest(executor::RequestState& state, const Status& error);
  void Emit(Response response);
  void PublishKvStats();  // what getKvCacheStats reports
  void RecordIteration(const executor::ScheduleResult& step, double latency_ms,
                       std::int64_t micro_batch_id = 0);

  // A launched micro-batch (ModelRunner::Launch); completed oldest first.
  struct InFlightStep {
    executor::ScheduleResult step;
    std::vector<bool> on_device;  // per item: the runner samples its token
    std::chrono::steady_clock::time_point start;
    std::int64_t micro_batch_id = 0;
  };

  const ExecutorConfig config_;
  std::unique_ptr<model::ModelRunner> runner_;
  const executor::SchedulerLimits limits_;
  kv_cache::BlockManager blocks_;
  executor::Scheduler scheduler_;
  std::unordered_map<IdType, std::unique_ptr<executor::RequestState>> states_;  // loop thread only
  // Requests sampled on the device so far (loop thread only); erased with the state.
  std::unordered_map<IdType, executor::DeviceSamplingInputs> device_inputs_;
  std::uint64_t iteration_ = 0;
  bool busy_ = false;                   // the last loop turn ran a step
  executor::StepProfile profile_;       // loop thread only
  std::deque<InFlightStep> in_flight_;  // loop thread only; at most max_micro_batches
  // LaunchStep's runner input, rebuilt in place each step (Scheduler::BuildStepInput's reuse).
  model::StepInput step_input_;
  std::unordered_set<IdType> held_cancels_;  // cancels of requests in flight, applied when back
  // Lookahead: ends decided while a later step still computes the request (EndRequest).
  struct HeldEnd {
    FinishReason reason = FinishReason::kNotFinished;
    Status error;  // not ok: the request fails with it
  };
  std::unordered_map<IdType, HeldEnd> held_ends_;
  // The runner reads a step's tokens from the step before on the device (supports_lookahead),
  // device sampling is on and no micro-batches split the steps.
  bool lookahead_ = false;
  std::chrono::steady_clock::time_point last_completion_;  // of a step (CompleteStep)
  std::int64_t num_launches_ = 0;
  // ExecutorConfig::busy_poll resolved, and what the spinning threads read without mu_: responses
  // ready, requests enqueued and not yet final, and a count of what gives the loop work (enqueues,
  // cancels, shutdown). Each is written under mu_.
  const bool busy_poll_;
  std::atomic<std::size_t> num_ready_{0};
  std::atomic<std::int64_t> num_unfinished_{0};
  std::atomic<std::uint64_t> work_events_{0};
  std::chrono::steady_clock::time_point last_work_;  // loop thread only: when it last had work

  mutable std::mutex mu_;
  std::condition_variable work_cv_;       // the loop waits here for requests / cancels / shutdown
  std::condition_variable responses_cv_;  // awaitResponses waits here
  std::deque<std::unique_ptr<executor::RequestState>> incoming_;
  std::unordered_set<IdType> cancels_;
  std::deque<Response> responses_;
  std::deque<IterationStats> iteration_stats_;
  KvCacheStats kv_stats_snapshot_;
  std::int64_t num_queued_ = 0;  // incoming + waiting in the scheduler, for max_queue_size
  IdType next_id_ = 1;
  bool shutdown_ = false;
  std::thread thread_;
};

}  // namespace inflight
