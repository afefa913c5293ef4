// Now on the steady clock in nanoseconds: the one clock of request timestamps, from the executor's
// to the backends' statistics and the server's (Triton's timestamps are unsigned; cast at the use).
#pragma once

#include <chrono>
#include <cstdint>

namespace inflight {

inline std::int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace inflight
