// The CPU's copy ceiling, measured with memcpy over buffers much larger than the caches.
#pragma once

#include <cstddef>

namespace inflight::bench {

// Median over `repeats` of copying `bytes` with `num_threads` threads (each a contiguous slice).
// Returns GB/s (1e9) counting bytes read plus bytes written (2 * bytes / time), as STREAM's Copy
// does.
double MeasureMemcpyGBps(std::size_t bytes, int num_threads, int repeats);

}  // namespace inflight::bench
