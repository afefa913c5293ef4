// Leader mode (TensorRT-LLM's kLEADER): one process per rank of a split engine, started together
// (mpirun -n tp*pp). Rank 0 runs the executor; every rank runs a ModelRunner over its shard, and
// the collectives inside Step need every rank to run the same step. So rank 0's runner is wrapped
// in a LeaderRunner, which sends each StepInput to the followers before its own Step, and the
// followers sit in RunFollower, stepping on what arrives, until the leader sends stop.
//
//   rank 0:  executor ── Step(in) ──▶ LeaderRunner ── Send(EncodeStep(in)) ──▶ ranks 1..N-1
//                                          │                                    RunFollower:
//                                          ▼                                    Decode, Step
//                                     local runner ◀──── collectives ────▶ their runners
//
// The executor does not know: it sees a ModelRunner whose StepOutput is the group's
// (model_runner.h: the complete output is on group rank 0).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "inflight/status.h"
#include "model/model_runner.h"
#include "model/step_codec.h"

namespace inflight::model {

// How the leader's messages reach the followers (mpi_step_channel.h: an MPI broadcast).
class StepChannel {
 public:
  virtual ~StepChannel() = default;
  // Leader: delivers `message` to every follower. An error when that does not finish in the
  // channel's time limit; the channel is then unusable.
  virtual Status Send(std::string_view message) = 0;
  // Leader: like Send, but returns once the message is on its way, without waiting for the
  // followers to take it: with micro-batches in flight the followers of later stages are busy
  // with earlier ones, and the leader computes meanwhile. Messages arrive in the order they were
  // posted or sent; a later Post or Send waits for earlier ones as far as it needs their buffers,
  // and reports their errors. The default sends at once.
  virtual Status Post(std::string_view message) { return Send(message); }
  // Follower: the leader's next message. Waits as long as the leader is idle.
  virtual Result<std::string> Receive() = 0;
};

class LeaderRunner final : public ModelRunner {
 public:
  // `group_kv_blocks`: the smallest KV pool of the group's ranks (mpi_load_report.h), which is
  // what the executor may schedule over; at most the local runner's.
  LeaderRunner(std::unique_ptr<ModelRunner> local, std::unique_ptr<StepChannel> channel,
               std::int64_t group_kv_blocks);
  // Sends stop, so the followers leave RunFollower.
  ~LeaderRunner() override;

  const EngineConfig& config() const override { return local_->config(); }
  std::int64_t num_kv_blocks() const override { return group_kv_blocks_; }
  const char* device_name() const override { return local_->device_name(); }
  std::int64_t memory_bytes() const override { return local_->memory_bytes(); }
  bool supports_device_sampling() const override { return local_->supports_device_sampling(); }
  // Sends `input` to the followers, then steps the local shard. Once a send failed, every later
  // step fails with that error: the followers are not where the leader is any more.
  Result<StepOutput> Step(const StepInput& input) override;
  // Micro-batches in flight: the local runner's (its pipeline's depth on the first stage). Launch
  // posts `input` to the followers (StepChannel::Post) and launches it on the local shard;
  // Complete completes the local shard's oldest step, whose output is the group's.
  std::int32_t max_steps_in_flight() const override { return local_->max_steps_in_flight(); }
  Status Launch(const StepInput& input) override;
  Result<StepOutput> Complete() override { return local_->Complete(); }

 private:
  // Records a failed delivery: every later step fails with it.
  Status Broken(const Status& delivery);

  std::unique_ptr<ModelRunner> local_;
  std::unique_ptr<StepChannel> channel_;
  std::int64_t group_kv_blocks_;
  EmbeddingBiasSender biases_;
  Status broken_;
};

// Follower: receives the leader's steps and runs each on `runner` until the leader sends stop
// (returns Ok). A step the runner refuses is logged and skipped (it fails alike on every rank); a
// message that does not parse, or a step whose collectives broke (kUnavailable), returns at once:
// the group cannot go on without this rank, and the caller ends the job.
// `runner` null: this rank failed to load; the leader knows (it refuses the model) and is expected
// to send stop; a step is then an error.
// `on_output`, when set, gets each step's result, its output or the refusal (orchestrator mode:
// the group's rank 0 sends it to the server process); an error from it ends the loop.
Status RunFollower(ModelRunner* runner, StepChannel& channel,
                   const std::function<Status(const Result<StepOutput>&)>& on_output = nullptr);

}  // namespace inflight::model
