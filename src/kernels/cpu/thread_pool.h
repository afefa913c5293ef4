// A small fixed pool of worker threads for splitting one op's rows across cores.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace inflight::kernels::cpu {

class ThreadPool {
 public:
  // num_threads counts the calling thread: 1 runs everything inline, 0 means hardware concurrency.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), each at least min_chunk long (except
  // when n itself is smaller), and returns when all are done. The caller runs one chunk itself.
  // NOTE: calls from several threads are serialised; a call from inside fn runs inline.
  void ParallelFor(std::int64_t n, std::int64_t min_chunk,
                   const std::function<void(std::int64_t, std::int64_t)>& fn);

 private:
  void WorkerLoop(int worker_index);
  void RunChunks();

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one ParallelFor at a time

  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  const std::function<void(std::int64_t, std::int64_t)>* fn_ = nullptr;
  std::int64_t n_ = 0;
  std::int64_t num_chunks_ = 0;
  std::int64_t next_chunk_ = 0;
  std::int64_t chunks_done_ = 0;
};

// Runs fn over [0, n) through `pool`, or inline when pool is nullptr.
inline void ParallelFor(ThreadPool* pool, std::int64_t n, std::int64_t min_chunk,
                        const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  if (pool == nullptr) {
    fn(0, n);
  } else {
    pool->ParallelFor(n, min_chunk, fn);
  }
}

}  // namespace inflight::kernels::cpu
