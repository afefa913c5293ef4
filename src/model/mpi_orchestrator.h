// Orchestrator mode (TensorRT-LLM's kORCHESTRATOR, TRTLLM_ORCHESTRATOR=1): the server process runs
// no shard. It spawns the tp_size x pp_size ranks of a model instance with MPI_Comm_spawn (our
// worker binary, inflight-executor-worker), keeps the executor and the scheduler, and drives the
// workers as a leader drives its followers (leader_runner.h), over a communicator that joins the
// server (rank 0) and the workers (ranks 1..N):
//
//   server: executor ── Step(in) ──▶ RemoteGroupRunner ── Send(EncodeStep(in)) ──▶ workers 0..N-1
//                                          ▲                                   (RunFollower; their
//                                          └──── EncodeStepOutput ◀── worker 0   own MPI world's
//                                                                               collectives)
//
// Each instance has its own workers, so several models or instances run on their own GPUs
// (gpu_device_ids "0,1;2,3": one group per instance).
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "model/leader_runner.h"
#include "model/model_runner.h"

namespace inflight::model {

// The server and its workers: `joined` has the server as rank 0 and the workers as 1..N; `link` is
// the intercommunicator MPI_Comm_spawn made, which Disconnect ends.
struct SpawnedGroup {
  MPI_Comm link = MPI_COMM_NULL;
  MPI_Comm joined = MPI_COMM_NULL;
  // Both sides call it at the end: frees `joined`, disconnects `link`.
  void Disconnect();
};

// Starts `num_workers` processes of `worker_path` with `args`. Errors name the binary and MPI's
// reason.
Result<SpawnedGroup> SpawnWorkers(const std::string& worker_path,
                                  const std::vector<std::string>& args, int num_workers);

// The worker side of SpawnWorkers; an error when the process was not spawned.
Result<SpawnedGroup> JoinServer();

// Sends a step's result (its output, or the runner's refusal) from the workers' rank 0 to the
// server (rank 0 of `comm`).
Status SendStepResult(MPI_Comm comm, const Result<StepOutput>& result);

// The server's ModelRunner over spawned workers: a step goes to every worker, the output comes back
// from the workers' rank 0. `group` (SpawnWorkers') is the runner's. `step_timeout`: the longest a
// step's output may take before the group counts as broken.
class RemoteGroupRunner final : public ModelRunner {
 public:
  RemoteGroupRunner(EngineConfig config, std::unique_ptr<StepChannel> channel, SpawnedGroup group,
                    std::int64_t group_kv_blocks, std::chrono::milliseconds step_timeout);
  // Sends stop, then lets the workers go.
  ~RemoteGroupRunner() override;

  const EngineConfig& config() const override { return config_; }
  std::int64_t num_kv_blocks() const override { return group_kv_blocks_; }
  const char* device_name() const override { return "mpi workers"; }
  std::int64_t memory_bytes() const override { return 0; }  // held by the workers
  Result<StepOutput> Step(const StepInput& input) override;

 private:
  EngineConfig config_;
  std::unique_ptr<StepChannel> channel_;
  SpawnedGroup group_;
  std::int64_t group_kv_blocks_;
  std::chrono::milliseconds step_timeout_;
  EmbeddingBiasSender biases_;
  Status broken_;
};

}  // namespace inflight::model
