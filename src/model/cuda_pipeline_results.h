// The first pipeline stage's side of micro-batches in flight on the CUDA runner
// (ModelRunner::Launch / Complete, docs/multi_gpu.md): while stage 0 computes the next micro-batch
// on the runner's stream, the results of the earlier ones (logits, sampled tokens; the last stage
// sends them, step_result_message.h) are received on a stream of their own and copied to pinned
// host memory, each step into its own slot (in_flight_slots.h). Launch queues and returns;
// Complete waits for the oldest step's result alone, not for the stream the next steps run on.
//
//   runner stream:  [step k: layers, send to stage 1] [step k+1: ...] ...
//                         | end event k
//   results stream:       +-> [recv result k] [copy to host k] (received event k) [recv k+1] ...
//
// The results stream waits for each step's end event before its receive, so receives follow the
// hand-overs in the order every rank issues them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "model/collectives.h"
#include "model/cuda_buffer.h"
#include "model/in_flight_slots.h"
#include "model/model_runner.h"

namespace inflight::model {

class CudaPipelineResults {
 public:
  // Up to `capacity` steps in flight (the pipeline's pp_size). Creates the stream and events on
  // the current device.
  static Result<std::unique_ptr<CudaPipelineResults>> Create(std::int32_t capacity);
  ~CudaPipelineResults();
  CudaPipelineResults(const CudaPipelineResults&) = delete;
  CudaPipelineResults& operator=(const CudaPipelineResults&) = delete;

  std::int32_t capacity() const { return slots_.capacity(); }
  std::int32_t in_flight() const { return slots_.in_flight(); }

  // Takes the next slot for a step about to be queued on `stream` and marks its start (for
  // StepOutput::device_ms). An error when `capacity` steps are in flight already.
  Status Begin(cudaStream_t stream);
  // Gives back the slot Begin took, for a step that failed before Post.
  void Abandon() { slots_.Abandon(); }
  // After the step's work on this stage (its layers and the hand-over to the next stage) is queued
  // on `stream`: posts the receive of its result on the results stream. `out` has the result's
  // shape (logits and sampled vectors sized, from the StepInput); Complete fills it in.
  Status Post(StepOutput out, cudaStream_t stream, Collectives& group);
  // The oldest posted step's output, once its result is on the host. Waits as the runner's steps
  // wait (Collectives::CheckWait: a failed peer or the timeout is an error).
  Result<StepOutput> Complete(Collectives& group);

 private:
  explicit CudaPipelineResults(std::int32_t capacity)
      : slots_(capacity), entries_(static_cast<std::size_t>(capacity)) {}

  struct Entry {
    StepOutput out;
    std::int64_t count = 0;  // floats in the result message
    DeviceBuffer message;    // [count] fp32, received from the last stage
    PinnedBuffer host;       // [count] fp32, its copy
    cudaEvent_t begin = nullptr, end = nullptr, received = nullptr;
  };
  InFlightSlots slots_;
  std::vector<Entry> entries_;  // by slot
  cudaStream_t stream_ = nullptr;
};

}  // namespace inflight::model
