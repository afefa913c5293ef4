// One instance of the LLM model: owns an Executor and the threads that answer Triton requests.
//
//   Execute (Triton's thread)  ──convert + enqueue──▶ Executor ──awaitResponses──▶ response thread
//                                                        ▲                          (sends,
//                                                        releases)
//   cancellation thread: polls ResponseFactoryIsCancelled ┘ cancelRequest
//   stats thread: getLatestIterationStats → MetricsReporter
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/metrics_reporter.h"
#include "backend/model_state.h"
#include "backend/stream_holdback.h"
#include "inflight/executor.h"
#include "triton/core/tritonbackend.h"

namespace inflight::backend {

class InstanceState {
 public:
  static Result<std::unique_ptr<InstanceState>> Create(ModelState& model,
                                                       TRITONBACKEND_ModelInstance* instance);
  ~InstanceState();
  InstanceState(const InstanceState&) = delete;
  InstanceState& operator=(const InstanceState&) = delete;

  // Answers or enqueues every request; afterwards the backend owns them all.
  void Execute(TRITONBACKEND_Request** requests, std::uint32_t count);

 private:
  // One Triton request; it may carry several batch rows, each an executor request.
  struct TritonRequest {
    TRITONBACKEND_Request* request = nullptr;
    TRITONBACKEND_ResponseFactory* factory = nullptr;
    std::string id;
    std::set<std::string> outputs;
    std::vector<IdType> executor_ids;
    int remaining_rows = 0;
    bool report_batch_index = false;
    bool return_perf_metrics = false;
    bool failed = false;  // an error response was sent with FINAL: later responses are dropped
    bool any_row_error = false;
    std::uint64_t exec_start_ns = 0;
  };
  struct Row {
    std::shared_ptr<TritonRequest> parent;
    std::int32_t batch_index = 0;
    std::int64_t input_len = 0;
    std::int64_t output_len = 0;
    std::shared_ptr<StreamHoldback> holdback;  // streamed rows, when the model has a tokenizer
  };

  InstanceState(ModelState& model, TRITONBACKEND_ModelInstance* instance);
  void ExecuteOne(TRITONBACKEND_Request* request);
  void HandleStop(TRITONBACKEND_Request* request, const std::string& id);
  // Sends an error as the only response of a request the backend has not enqueued, and releases it.
  void RespondError(TRITONBACKEND_Request* request, const Status& status, std::uint64_t start_ns);
  void HandleResponse(Response& response);    // response thread; takes mu_
  void FinishRequest(TritonRequest& parent);  // report stats, release; mu_ held
  void ResponseLoop();
  void CancellationLoop();
  void StatsLoop();
  // Waits `period`; false when the instance is stopping.
  bool SleepUnlessStopping(std::chrono::milliseconds period);

  ModelState& model_;
  TRITONBACKEND_ModelInstance* instance_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<MetricsReporter> metrics_;

  std::mutex mu_;
  std::unordered_map<IdType, Row> rows_;
  std::atomic<bool> stopping_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_;  // wakes the periodic threads at shutdown
  std::thread response_thread_;
  std::thread cancellation_thread_;
  std::thread stats_thread_;
};

}  // namespace inflight::backend
