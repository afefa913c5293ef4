// The communication a model runner needs when its engine is split over processes (model_shard.h):
// the tensor-parallel group's all-reduce after each row-parallel layer and all-gather of a
// vocabulary-parallel lm_head's logits, and the pipeline's hand-over of activations between
// stages. The forward passes (model/transformer.cc, model/cuda_transformer.cc) call them at those
// places and nowhere else; an implementation (NCCL on the device, MPI on the CPU) moves the data.
//
// `stream`: the cudaStream_t the CUDA runner queues its work on. The operation is queued there too,
// in stream order and without a host synchronisation, so that a decode step that contains it can
// be captured into a CUDA graph. The CPU runner passes null and reads the result on return.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "common/dtype.h"
#include "inflight/status.h"

namespace inflight::model {

class Collectives {
 public:
  virtual ~Collectives() = default;
  // This process's place in the group (ModelShard's ranks and sizes).
  virtual std::int32_t tp_rank() const = 0;
  virtual std::int32_t tp_size() const = 0;
  virtual std::int32_t pp_rank() const = 0;
  virtual std::int32_t pp_size() const = 0;
  // The CUDA device the group's operations run on, when they run on one (NCCL): the runner of this
  // rank runs there too. nullopt for host collectives.
  virtual std::optional<int> device() const { return std::nullopt; }

  // In place over the tensor-parallel ranks: `buffer` ([count] of `dtype`) becomes the elementwise
  // sum of every rank's `buffer`.
  virtual Status AllReduceSum(void* buffer, std::int64_t count, DType dtype, void* stream) = 0;
  // In place over the tensor-parallel ranks: `logits` is [rows, cols] fp32 row-major, of which this
  // rank computed columns [col_begin, col_end) (ModelShard's vocabulary range; the ranges of the
  // ranks, in rank order, partition [0, cols)); afterwards every rank holds every column. A range
  // that is all of [0, cols) (one rank) leaves nothing to gather.
  virtual Status AllGatherColumns(float* logits, std::int64_t rows, std::int64_t cols,
                                  std::int64_t col_begin, std::int64_t col_end, void* stream) = 0;
  // Pipeline: hands `buffer` ([count] of `dtype`, the activations at the end of this stage's
  // layers) to the same tensor-parallel rank of the next stage, or receives the previous stage's
  // into `buffer`. Every stage runs the same step, so both sides know `count`.
  virtual Status SendToNextStage(const void* buffer, std::int64_t count, DType dtype,
                                 void* stream) = 0;
  virtual Status ReceiveFromPreviousStage(void* buffer, std::int64_t count, DType dtype,
                                          void* stream) = 0;
  // Pipeline: the step's result goes back to where the step came from. The last stage hands
  // `buffer` (the step's logits, or its sampled tokens) to the same tensor-parallel rank of the
  // first stage, which receives it into `buffer`; so the first stage's ranks, group rank 0
  // included, return the complete StepOutput (model_runner.h). Both sides know `count`.
  virtual Status SendToFirstStage(const void* buffer, std::int64_t count, DType dtype,
                                  void* stream) = 0;
  virtual Status ReceiveFromLastStage(void* buffer, std::int64_t count, DType dtype,
                                      void* stream) = 0;
  // Pipeline with several steps in flight (ModelRunner::Launch): the first stage posts the receive
  // of a step's result when it launches the step, and finishes it when the step is completed, so
  // that the last stage's send finds its receive posted while the first stage computes the next
  // micro-batch (no stage waits for a peer that is busy with another micro-batch). `buffer` must
  // stay valid until the matching Finish; receives finish in the order they were started. The
  // default posts nothing: Finish receives the oldest started one then (ReceiveFromLastStage),
  // which is correct for any transport but leaves the overlap to its buffering.
  virtual Status StartReceiveFromLastStage(void* buffer, std::int64_t count, DType dtype,
                                           void* stream);
  virtual Status FinishReceiveFromLastStage();

  // For a runner that waits on the host for queued work containing the group's operations (the
  // CUDA runner, polling its step's end event): called every few milliseconds with how long it
  // has waited. An error means the work will not complete: a peer failed (the transport's
  // asynchronous error) or the wait passed the group's timeout; the group has then aborted its
  // operations, so that the queued work ends, and refuses every later call. Ok: keep waiting.
  // Collectives that complete on return (CPU) have nothing to check.
  virtual Status CheckWait(double /*waited_seconds*/) { return Status::Ok(); }
  // Called on every poll of such a wait. NOTE: a leader posts each step to its followers with a
  // nonblocking MPI broadcast and then runs the step; MPI moves a message of more than its eager
  // size only inside MPI calls, and a step of NCCL operations makes none, so without this the
  // followers never receive the step that rank 0's NCCL operations wait for. Transports whose
  // peers may wait on such messages drive MPI's progress here.
  virtual void Progress() {}

 private:
  struct StartedReceive {
    void* buffer;
    std::int64_t count;
    DType dtype;
    void* stream;
  };
  std::deque<StartedReceive> started_receives_;  // the default Start / Finish
};

// One process runs the whole engine (tp 1, pp 1): a sum or a gather over one rank is the buffer
// itself, so both return at once, queueing nothing and waiting for nothing. There is no other
// stage: a send or a receive is an error (the runner never asks for one with pp 1).
class SingleProcessCollectives final : public Collectives {
 public:
  std::int32_t tp_rank() const override { return 0; }
  std::int32_t tp_size() const override { return 1; }
  std::int32_t pp_rank() const override { return 0; }
  std::int32_t pp_size() const override { return 1; }
  Status AllReduceSum(void* /*buffer*/, std::int64_t /*count*/, DType /*dtype*/,
                      void* /*stream*/) override {
    return Status::Ok();
  }
  Status AllGatherColumns(float* /*logits*/, std::int64_t /*rows*/, std::int64_t /*cols*/,
                          std::int64_t /*col_begin*/, std::int64_t /*col_end*/,
                          void* /*stream*/) override {
    return Status::Ok();
  }
  Status SendToNextStage(const void* buffer, std::int64_t count, DType dtype,
                         void* stream) override;
  Status ReceiveFromPreviousStage(void* buffer, std::int64_t count, DType dtype,
                                  void* stream) override;
  Status SendToFirstStage(const void* buffer, std::int64_t count, DType dtype,
                          void* stream) override;
  Status ReceiveFromLastStage(void* buffer, std::int64_t count, DType dtype, void* stream) override;
};

}  // namespace inflight::model
