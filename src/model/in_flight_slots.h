// Which of a runner's per-step resources (result buffers, events) each launched step holds while
// it is in flight (ModelRunner::Launch / Complete): a ring of `capacity` slots taken at launch and
// given back at completion, oldest first, as steps complete in launch order. Host code only, so
// that the bookkeeping is tested on the CPU; the CUDA runner's first pipeline stage uses it, and
// so does one process with lookahead (cuda_local_steps.h).
#pragma once

#include <cstdint>
#include <string>

#include "inflight/status.h"

namespace inflight::model {

class InFlightSlots {
 public:
  explicit InFlightSlots(std::int32_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  std::int32_t capacity() const { return capacity_; }
  std::int32_t in_flight() const { return count_; }
  bool empty() const { return count_ == 0; }

  // The slot of the next launched step; an error when every slot is taken (more launches than
  // max_steps_in_flight without a Complete).
  Result<std::int32_t> Take() {
    if (count_ == capacity_) {
      return Internal("a step was launched while " + std::to_string(count_) +
                      " are in flight, the most this runner keeps (max_steps_in_flight " +
                      std::to_string(capacity_) + "); complete one first");
    }
    const std::int32_t slot = (oldest_ + count_) % capacity_;
    ++count_;
    return slot;
  }
  // The oldest taken slot, which the caller completes now; an error when none is in flight.
  Result<std::int32_t> Oldest() const {
    if (count_ == 0) return Internal("no launched step to complete");
    return oldest_;
  }
  // Gives the newest slot back (a launch that failed before its step was in flight).
  void ReleaseNewest() {
    if (count_ > 0) --count_;
  }
  // Gives the oldest slot back.
  void ReleaseOldest() {
    if (count_ == 0) return;
    oldest_ = (oldest_ + 1) % capacity_;
    --count_;
  }

 private:
  std::int32_t capacity_;
  std::int32_t oldest_ = 0;
  std::int32_t count_ = 0;
};

}  // namespace inflight::model
