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
  // the capacity without a Complete). The message names the capacity, not max_steps_in_flight():
  // with lookahead one process keeps two steps while that reports one (micro-batches).
  Result<std::int32_t> Take() {
    if (count_ == capacity_) {
      return Internal("a step was launched while " + std::to_string(count_) +
                      " are in flight, the most this runner keeps at once (" +
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

  // A launch in two parts, as the CUDA runner's are: Begin takes the slot (Take) and holds it as
  // begun while the step's work is queued; Posted puts it in flight (Complete takes it), Abandon
  // gives it back (the step failed before it was in flight). One launch is begun at a time.
  Result<std::int32_t> Begin() {
    if (begun_ >= 0) return Internal("a step's launch began before the previous one was posted");
    Result<std::int32_t> slot = Take();
    if (slot.ok()) begun_ = *slot;
    return slot;
  }
  // The slot Begin took; an error when no launch is begun.
  Result<std::int32_t> begun() const {
    if (begun_ < 0) return Internal("a step was posted without being begun");
    return begun_;
  }
  void Posted() { begun_ = -1; }
  void Abandon() {
    if (begun_ < 0) return;
    ReleaseNewest();
    begun_ = -1;
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
  std::int32_t begun_ = -1;  // the slot Begin took, until Posted or Abandon
};

}  // namespace inflight::model
