#include "kernels/cpu/thread_pool.h"

#include <algorithm>

namespace inflight::kernels::cpu {
namespace {
thread_local bool tls_inside_pool = false;
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0)
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

// Takes chunks until none are left; the chunk boundaries depend only on n_ and num_chunks_, so the
// result of a deterministic fn does not depend on which thread ran which chunk.
void ThreadPool::RunChunks() {
  for (;;) {
    std::int64_t chunk;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_chunk_ >= num_chunks_) return;
      chunk = next_chunk_++;
    }
    const std::int64_t begin = n_ * chunk / num_chunks_;
    const std::int64_t end = n_ * (chunk + 1) / num_chunks_;
    tls_inside_pool = true;
    (*fn_)(begin, end);
    tls_inside_pool = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (++chunks_done_ == num_chunks_) done_cv_.notify_all();
    }
  }
}

void ThreadPool::WorkerLoop(int /*worker_index*/) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    RunChunks();
  }
}

void ThreadPool::ParallelFor(std::int64_t n, std::int64_t min_chunk,
                             const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<std::int64_t>(1, min_chunk);
  const std::int64_t num_chunks =
      std::min<std::int64_t>(num_threads(), std::max<std::int64_t>(1, n / min_chunk));
  if (num_chunks == 1 || tls_inside_pool) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    num_chunks_ = num_chunks;
    next_chunk_ = 0;
    chunks_done_ = 0;
    ++generation_;
  }
  work_cv_.notify_all();
  RunChunks();
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return chunks_done_ == num_chunks_; });
  fn_ = nullptr;
}

}  // namespace inflight::kernels::cpu
