// One queue per model feeding its instances: each instance runs TRITONBACKEND_ModelInstanceExecute
// on its own thread, never twice at once. With dynamic_batching, one Execute may get several
// requests (up to max_batch_size in total batch size, gathered within max_queue_delay).
//
// Models of our LLM backend (inflight, whose Execute only hands requests to its executor) skip the
// hop when nothing is queued and an instance is idle: Enqueue runs Execute on the caller's thread.
// A concurrency-1 request otherwise woke this thread between the HTTP thread and the executor.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/inference_request.h"

namespace inflight::server {

class Model;
class ModelInstance;

class InstanceScheduler {
 public:
  explicit InstanceScheduler(Model* model);
  ~InstanceScheduler();  // Stop()

  void Start();
  // kUnavailable "Exceeds maximum queue size" when the queue is full; kUnavailable when stopped.
  Status Enqueue(std::unique_ptr<InferenceRequest> request);
  // Joins the instance threads (after any Execute Enqueue is running); requests still queued are
  // answered with kUnavailable.
  void Stop();
  size_t QueueSize() const;

 private:
  void Run(ModelInstance* instance);
  // Waits for work and for `instance` to be idle, then claims it; empty when stopping.
  std::vector<std::unique_ptr<InferenceRequest>> NextBatch(ModelInstance* instance);
  // Marks `instance` idle again (under mu_) and wakes the threads waiting for one.
  void Release(ModelInstance* instance);
  void Execute(ModelInstance* instance, std::vector<std::unique_ptr<InferenceRequest>> batch);

  Model* model_;
  const bool dynamic_batching_;
  const int64_t max_batch_size_;
  const uint64_t max_queue_delay_us_;
  const uint32_t max_queue_size_;
  const bool execute_inline_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<InferenceRequest>> queue_;
  bool stopping_ = false;
  std::vector<ModelInstance*> idle_;  // instances not in an Execute
  int inline_running_ = 0;            // Executes Enqueue is running on callers' threads
  std::vector<std::thread> threads_;
};

}  // namespace inflight::server
