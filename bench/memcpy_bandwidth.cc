#include "memcpy_bandwidth.h"

#include <cstring>
#include <thread>
#include <vector>

#include "table.h"

namespace inflight::bench {

double MeasureMemcpyGBps(std::size_t bytes, int num_threads, int repeats) {
  num_threads = num_threads < 1 ? 1 : num_threads;
  // NOTE: both buffers are written once first so that page faults are not timed.
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const std::size_t slice = bytes / static_cast<std::size_t>(num_threads);
  std::vector<double> rates;
  for (int r = 0; r < repeats + 1; ++r) {
    const double t0 = NowSeconds();
    std::vector<std::thread> threads;
    for (int t = 0; t < num_threads; ++t) {
      const std::size_t begin = slice * static_cast<std::size_t>(t);
      const std::size_t end = t + 1 == num_threads ? bytes : begin + slice;
      threads.emplace_back(
          [&, begin, end] { std::memcpy(dst.data() + begin, src.data() + begin, end - begin); });
    }
    for (auto& th : threads) th.join();
    const double seconds = NowSeconds() - t0;
    if (r > 0)
      rates.push_back(2.0 * static_cast<double>(bytes) / seconds / 1e9);  // first run: warm-up
  }
  return Median(rates);
}

}  // namespace inflight::bench
