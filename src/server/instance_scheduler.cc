#include "server/instance_scheduler.h"

#include <algorithm>
#include <chrono>

#include "common/logging.h"
#include "server/backend_objects.h"

namespace inflight::server {

InstanceScheduler::InstanceScheduler(Model* model)
    : model_(model),
      dynamic_batching_(model->config.has_dynamic_batching()),
      max_batch_size_(model->config.max_batch_size()),
      max_queue_delay_us_(model->config.dynamic_batching().max_queue_delay_microseconds()),
      max_queue_size_(model->config.dynamic_batching().default_queue_policy().max_queue_size()),
      execute_inline_(model->backend != nullptr && model->backend->name == "inflight" &&
                      (!dynamic_batching_ || max_queue_delay_us_ == 0)) {}

InstanceScheduler::~InstanceScheduler() {
  Stop();
}

void InstanceScheduler::Start() {
  {
    std::lock_guard lock(mu_);
    for (auto& instance : model_->instances) idle_.push_back(instance.get());
  }
  for (auto& instance : model_->instances) {
    threads_.emplace_back([this, inst = instance.get()] { Run(inst); });
  }
}

Status InstanceScheduler::Enqueue(std::unique_ptr<InferenceRequest> request) {
  ModelInstance* inline_instance = nullptr;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      return Unavailable("model '" + model_->name + "' is unloading: request rejected");
    }
    // Text and code of Triton's RequestQueue for a full queue (clients match on it).
    if (max_queue_size_ > 0 && queue_.size() >= max_queue_size_) {
      return Unavailable("Exceeds maximum queue size");
    }
    request->queue_start_ns = NowNs();
    if (execute_inline_ && queue_.empty() && !idle_.empty()) {
      inline_instance = idle_.back();
      idle_.pop_back();
      ++inline_running_;
    } else {
      queue_.push_back(std::move(request));
    }
  }
  if (inline_instance == nullptr) {
    // NOTE: all: a thread woken for a busy instance would go back to sleep with the wake.
    cv_.notify_all();
    return Status::Ok();
  }
  std::vector<std::unique_ptr<InferenceRequest>> batch;
  batch.push_back(std::move(request));
  Execute(inline_instance, std::move(batch));
  {
    std::lock_guard lock(mu_);
    --inline_running_;
  }
  Release(inline_instance);
  return Status::Ok();
}

void InstanceScheduler::Release(ModelInstance* instance) {
  {
    std::lock_guard lock(mu_);
    idle_.push_back(instance);
  }
  cv_.notify_all();
}

size_t InstanceScheduler::QueueSize() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void InstanceScheduler::Stop() {
  std::deque<std::unique_ptr<InferenceRequest>> left;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    left.swap(queue_);
  }
  cv_.notify_all();
  {
    // An Execute on a caller's thread finishes before the instances go.
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return inline_running_ == 0; });
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  for (auto& r : left) {
    r->channel->Fail(
        Unavailable("model '" + model_->name + "' was unloaded before the request ran"));
    model_->stats->ReportOutcome(false, r->queue_start_ns, NowNs());
  }
}

std::vector<std::unique_ptr<InferenceRequest>> InstanceScheduler::NextBatch(
    ModelInstance* instance) {
  std::vector<std::unique_ptr<InferenceRequest>> batch;
  std::unique_lock lock(mu_);
  const auto idle = [&] { return std::find(idle_.begin(), idle_.end(), instance) != idle_.end(); };
  cv_.wait(lock, [&] { return stopping_ || (!queue_.empty() && idle()); });
  if (stopping_) return batch;
  const bool gather = dynamic_batching_ && max_batch_size_ > 0;
  if (gather && max_queue_delay_us_ > 0) {
    // Wait for more requests until the oldest has waited max_queue_delay or the batch is full.
    const auto deadline = std::chrono::steady_clock::time_point(
                              std::chrono::nanoseconds(queue_.front()->queue_start_ns)) +
                          std::chrono::microseconds(max_queue_delay_us_);
    auto queued_batch = [&] {
      int64_t total = 0;
      for (const auto& r : queue_) total += r->batch_size;
      return total;
    };
    cv_.wait_until(lock, deadline, [&] {
      return stopping_ || queue_.empty() || queued_batch() >= max_batch_size_;
    });
    if (stopping_ || queue_.empty()) return batch;
  }
  idle_.erase(std::find(idle_.begin(), idle_.end(), instance));
  int64_t total = 0;
  while (!queue_.empty()) {
    const int64_t next = queue_.front()->batch_size;
    if (!batch.empty() && (!gather || total + next > max_batch_size_)) break;
    total += next;
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return batch;
}

void InstanceScheduler::Run(ModelInstance* instance) {
  while (true) {
    auto batch = NextBatch(instance);
    if (batch.empty()) {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      continue;
    }
    Execute(instance, std::move(batch));
    Release(instance);
  }
}

void InstanceScheduler::Execute(ModelInstance* instance,
                                std::vector<std::unique_ptr<InferenceRequest>> batch) {
  // A request cancelled while it waited is answered here, as Triton does, without running it.
  std::vector<std::unique_ptr<InferenceRequest>> runnable;
  for (auto& r : batch) {
    if (r->channel->IsCancelled()) {
      r->channel->Fail(
          Cancelled("request for model '" + model_->name + "' was cancelled before it ran"));
      model_->stats->ReportOutcome(false, r->queue_start_ns, NowNs(), FailureReason::kCanceled);
    } else {
      runnable.push_back(std::move(r));
    }
  }
  if (runnable.empty()) return;
  std::vector<TRITONBACKEND_Request*> handles;
  handles.reserve(runnable.size());
  for (auto& r : runnable) handles.push_back(ToHandle<TRITONBACKEND_Request>(r.get()));
  TRITONSERVER_Error* err = model_->backend->library->instance_execute(
      ToHandle<TRITONBACKEND_ModelInstance>(instance), handles.data(),
      static_cast<uint32_t>(handles.size()));
  if (err == nullptr) {
    // The backend owns them now and frees each with TRITONBACKEND_RequestRelease.
    for (auto& r : runnable) (void)r.release();
    return;
  }
  const Status status = TakeTritonError(err);
  LOG_ERROR("model '{}' instance '{}' failed to execute {} request(s): {}", model_->name,
            instance->name, runnable.size(), status.message());
  for (auto& r : runnable) {
    r->channel->Fail(status);
    model_->stats->ReportOutcome(false, r->queue_start_ns, NowNs(), FailureReason::kBackend);
  }
}

}  // namespace inflight::server
