// Steps in flight on one process (tp 1 x pp 1; ModelRunner::Launch / Complete) for lookahead
// (ModelRunner::supports_lookahead): Launch queues a step on the runner's stream, then its sampled
// tokens' copy into pinned memory of the step's own slot (in_flight_slots.h), and returns;
// Complete waits for the oldest step's end event alone. So the executor launches step k + 1 (its
// decode tokens read on the device from step k's samples, lookahead_tokens.h) before step k's
// tokens are back, and takes step k's tokens while the device computes step k + 1:
//
//   stream:  [step k: uploads, layers, sampling, ids -> slot k] (end k) [step k+1 ...] (end k+1)
//   host:    ... Launch k+1 | Complete k (waits for end k) | accept k's tokens | Launch k+2 | ...
//
// A step's uploads come from pageable host memory (staged by the driver before the call returns)
// and its device buffers are reused in stream order, so only what comes back needs a slot.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "inflight/status.h"
#include "model/cuda_buffer.h"
#include "model/in_flight_slots.h"
#include "model/model_runner.h"

namespace inflight::model {

// Where a queued step's device-sampled rows are: row j belongs to sequence `sequences[j]`; its id
// is 32-bit word j of `words` (device memory), its log-probability (float bits) word
// `log_prob_offset + j`. No sequences: nothing was sampled on the device.
struct QueuedSamples {
  const void* words = nullptr;
  std::int64_t log_prob_offset = 0;
  std::vector<std::int32_t> sequences;
};

class CudaLocalSteps {
 public:
  // Up to `capacity` steps in flight. Creates the events on the current device.
  static Result<std::unique_ptr<CudaLocalSteps>> Create(std::int32_t capacity);
  ~CudaLocalSteps();
  CudaLocalSteps(const CudaLocalSteps&) = delete;
  CudaLocalSteps& operator=(const CudaLocalSteps&) = delete;

  std::int32_t capacity() const { return slots_.capacity(); }
  std::int32_t in_flight() const { return slots_.in_flight(); }

  // Takes the next slot for a step about to be queued on `stream` and marks its start (for
  // StepOutput::device_ms). An error when `capacity` steps are in flight already.
  Status Begin(cudaStream_t stream);
  // Gives back the slot Begin took, for a step that failed before Post.
  void Abandon() { slots_.Abandon(); }
  // After the step's work is queued on `stream`: queues the copy of its sampled rows to the slot's
  // pinned memory and the step's end event. `out` has everything but the sampled values
  // (vocab_size, row_begin and host logits, which a step brings back before its Launch returns);
  // `num_sequences` sizes the sampled vectors Complete fills. An error gives the slot back (the
  // step is not in flight), as Abandon.
  Status Post(StepOutput out, std::int64_t num_sequences, QueuedSamples samples,
              cudaStream_t stream);
  // The oldest posted step's output, once its end event has passed.
  Result<StepOutput> Complete();

 private:
  explicit CudaLocalSteps(std::int32_t capacity)
      : slots_(capacity), entries_(static_cast<std::size_t>(capacity)) {}

  struct Entry {
    StepOutput out;
    std::int64_t num_sequences = 0;
    QueuedSamples samples;  // `words` unused once the copy is queued
    PinnedBuffer host;      // the sampled ids, then their log-probs
    cudaEvent_t begin = nullptr, end = nullptr;
  };
  // Post's queued work: the sampled rows' copy and the end event.
  Status QueueEnd(Entry& e, cudaStream_t stream);

  InFlightSlots slots_;
  std::vector<Entry> entries_;  // by slot
};

}  // namespace inflight::model
