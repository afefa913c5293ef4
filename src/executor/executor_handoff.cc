// The executor's hand-offs between the threads that use it and its iteration thread: requests and
// cancellations in, responses out, shutdown, and how each side waits for the other (sleeping on a
// condition variable, or spinning first under ExecutorConfig::busy_poll).
#include <algorithm>
#include <chrono>

#include "common/spin_wait.h"
#include "executor/executor_impl.h"
#include "executor/response_builder.h"

namespace inflight {

using executor::RequestState;

namespace {

// How long the iteration thread spins for new work after its last (ExecutorConfig::busy_poll): a
// closed-loop client's next request comes within about a millisecond of the previous answer.
constexpr auto kIdlePollWindow = std::chrono::milliseconds(20);

}  // namespace

Result<IdType> Executor::Impl::Enqueue(const Request& request) {
  RETURN_IF_ERROR(Validate(request));
  std::lock_guard<std::mutex> lock(mu_);
  return EnqueueLocked(request);
}

std::vector<Result<IdType>> Executor::Impl::EnqueueAll(const std::vector<Request>& requests) {
  std::vector<Status> valid;
  valid.reserve(requests.size());
  for (const Request& r : requests) valid.push_back(Validate(r));
  std::vector<Result<IdType>> ids;
  ids.reserve(requests.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ids.push_back(valid[i].ok() ? EnqueueLocked(requests[i]) : Result<IdType>(valid[i]));
  }
  return ids;
}

Result<IdType> Executor::Impl::EnqueueLocked(const Request& request) {
  if (shutdown_) return Unavailable("the executor is shut down");
  if (config_.max_queue_size && *config_.max_queue_size > 0 &&
      num_queued_ >= static_cast<std::int64_t>(*config_.max_queue_size)) {
    // NVIDIA's text, so clients that match on it keep working.
    return Unavailable("Maximum queue size of " + std::to_string(*config_.max_queue_size) +
                       " has been reached, please try again later");
  }
  const IdType id = next_id_++;
  incoming_.push_back(std::make_unique<RequestState>(id, request, SteadyNowNs()));
  ++num_queued_;
  work_events_.fetch_add(1, std::memory_order_release);
  work_cv_.notify_one();
  // A waiter asleep in Await because nothing was in flight starts spinning now, while the request
  // runs, rather than being woken by its first response.
  if (num_unfinished_.fetch_add(1, std::memory_order_release) == 0 && busy_poll_) {
    responses_cv_.notify_all();
  }
  return id;
}

void Executor::Impl::Cancel(IdType id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_) return;
  cancels_.insert(id);
  work_events_.fetch_add(1, std::memory_order_release);
  work_cv_.notify_one();
}

std::vector<Response> Executor::Impl::Await(std::optional<IdType> id,
                                            std::optional<std::chrono::milliseconds> timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = timeout ? Clock::now() + *timeout : Clock::time_point::max();
  std::unique_lock<std::mutex> lock(mu_);
  const auto ready = [&] {
    if (shutdown_) return true;
    if (!id) return !responses_.empty();
    return std::any_of(responses_.begin(), responses_.end(),
                       [&](const Response& r) { return r.request_id == *id; });
  };
  // A wait for one id does not spin: other requests' responses would end every spin at once.
  const auto spin = [&] {
    return busy_poll_ && !id && num_unfinished_.load(std::memory_order_acquire) > 0;
  };
  while (!ready() && Clock::now() < deadline) {
    if (spin()) {
      lock.unlock();
      SpinUntil(
          [&] {
            return num_ready_.load(std::memory_order_acquire) > 0 ||
                   num_unfinished_.load(std::memory_order_acquire) == 0;
          },
          deadline);
      lock.lock();
      continue;
    }
    const auto wake = [&] { return ready() || spin(); };
    if (timeout) {
      responses_cv_.wait_until(lock, deadline, wake);
    } else {
      responses_cv_.wait(lock, wake);
    }
  }
  std::vector<Response> out;
  for (auto it = responses_.begin(); it != responses_.end();) {
    if (!id || it->request_id == *id) {
      out.push_back(std::move(*it));
      it = responses_.erase(it);
    } else {
      ++it;
    }
  }
  num_ready_.store(responses_.size(), std::memory_order_release);
  return out;
}

std::deque<IterationStats> Executor::Impl::TakeIterationStats() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(iteration_stats_, {});
}

KvCacheStats Executor::Impl::kv_cache_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kv_stats_snapshot_;
}

bool Executor::Impl::accepting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !shutdown_;
}

void Executor::Impl::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
    work_events_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The loop has stopped: this thread now owns the scheduler and the states.
  const Status gone = Cancelled("the executor shut down before the request finished");
  std::deque<std::unique_ptr<RequestState>> incoming;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(incoming_);
  }
  for (auto& s : incoming) Emit(executor::MakeErrorResponse(s->sequence.id, gone));
  for (auto& [id, s] : states_) {
    scheduler_.Cancel(&s->sequence);
    Emit(executor::MakeErrorResponse(id, gone));
  }
  states_.clear();
  device_inputs_.clear();
  responses_cv_.notify_all();
}

void Executor::Impl::Emit(Response response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (response.isFinal()) num_unfinished_.fetch_sub(1, std::memory_order_release);
  responses_.push_back(std::move(response));
  num_ready_.store(responses_.size(), std::memory_order_release);
  responses_cv_.notify_all();
}

bool Executor::Impl::WaitForWork() {
  using Clock = std::chrono::steady_clock;
  const auto has_work = [&] {
    return shutdown_ || !incoming_.empty() || !cancels_.empty() || scheduler_.HasWork();
  };
  std::unique_lock<std::mutex> lock(mu_);
  if (!has_work() && busy_poll_ && Clock::now() < last_work_ + kIdlePollWindow) {
    // Read under mu_: whatever gives work after this point changes it.
    const std::uint64_t seen = work_events_.load(std::memory_order_relaxed);
    lock.unlock();
    SpinUntil([&] { return work_events_.load(std::memory_order_acquire) != seen; },
              last_work_ + kIdlePollWindow);
    lock.lock();
  }
  work_cv_.wait(lock, has_work);
  last_work_ = Clock::now();
  return !shutdown_;
}

}  // namespace inflight
