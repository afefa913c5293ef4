// Waiting by polling instead of sleeping, for the few waits whose wake-up latency is the cost: on
// the device's virtual machines a thread blocked on a condition variable resumes 20-70 us after it
// is notified once it has been idle a few milliseconds (bench/results/2026-11-30-h200-server-
// overhead.md), and a request's way through the server crosses several such waits. A spinning
// thread holds a core, so callers spin only while work is in flight or for a bounded window.
#pragma once

#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace inflight {

// Tells the core that this thread is spinning (x86 PAUSE, Arm YIELD), so a sibling hyperthread
// runs and the loop does not flood the memory system with loads.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::this_thread::yield();
#endif
}

// Spins until `done()` is true or `deadline` passes; returns done()'s last value. The clock is read
// every few dozen turns only: done() is the cheap check (an atomic load).
template <class Done>
bool SpinUntil(Done done, std::chrono::steady_clock::time_point deadline) {
  constexpr int kTurnsPerClockRead = 64;
  while (true) {
    for (int i = 0; i < kTurnsPerClockRead; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace inflight
