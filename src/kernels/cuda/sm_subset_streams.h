// Streams whose kernels run on only part of the device's multiprocessors (CUDA green contexts), at
// the highest stream priority: a compute-bound kernel launched on one takes those SMs first, while
// a memory-bound kernel on an ordinary stream takes the rest, and those SMs too once the first has
// dispatched all its blocks. Neither kernel needs a persistent grid or to fit beside the other on
// an SM. The driver entry points (CUDA 12.5+) are looked up at run time, so nothing here links
// libcuda and a machine without a driver still loads the library.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace inflight::kernels::cuda {

class SmSubsetStreams {
 public:
  // One stream per entry of sms on the current device, confined to that many SMs (rounded to the
  // driver's split granularity; at least one group, never all). nullptr with *error set when the
  // driver has no green contexts or refuses the split.
  static std::unique_ptr<SmSubsetStreams> Create(const std::vector<int>& sms, std::string* error);
  ~SmSubsetStreams();
  SmSubsetStreams(const SmSubsetStreams&) = delete;
  SmSubsetStreams& operator=(const SmSubsetStreams&) = delete;

  // SMs of each stream (as rounded), in the order asked for, and the streams themselves.
  const std::vector<int>& sms() const { return sms_; }
  cudaStream_t stream(std::size_t i) const { return streams_[i]; }
  int device_sms() const { return device_sms_; }

 private:
  SmSubsetStreams() = default;
  struct Driver;
  std::unique_ptr<Driver> driver_;
  std::vector<void*> green_contexts_;
  std::vector<int> sms_;
  std::vector<cudaStream_t> streams_;
  int device_sms_ = 0;
};

}  // namespace inflight::kernels::cuda
