#include "model/mpi_wait.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace inflight::model {
namespace {

constexpr auto kSpin = std::chrono::milliseconds(2);
constexpr auto kFirstSleep = std::chrono::microseconds(20);
constexpr auto kMaxSleep = std::chrono::microseconds(1000);

}  // namespace

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

Status WaitForMpiRequests(MPI_Request* requests, int count,
                          std::optional<std::chrono::milliseconds> timeout,
                          const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto sleep = std::chrono::duration_cast<std::chrono::microseconds>(kFirstSleep);
  while (true) {
    int done = 0;
    const int rc = MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return Internal(what + " failed: " + MpiErrorText(rc));
    if (done) return Status::Ok();
    const auto waited = Clock::now() - start;
    if (timeout && waited > *timeout) {
      return Unavailable(what + " did not complete within " + std::to_string(timeout->count()) +
                         " ms");
    }
    if (waited < kSpin) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min<std::chrono::microseconds>(sleep * 2, kMaxSleep);
    }
  }
}

}  // namespace inflight::model
