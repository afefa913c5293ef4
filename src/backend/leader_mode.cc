#include "backend/leader_mode.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/orchestrator_mode.h"
#include "common/logging.h"
#include "common/mpi_launch.h"
#include "executor/runner_factory.h"
#include "model/engine_config.h"
#ifdef INFLIGHT_BACKEND_MPI
#include <mpi.h>

#include "backend/group_collectives.h"
#include "model/leader_runner.h"
#include "model/mpi_load_report.h"
#include "model/mpi_node_layout.h"
#include "model/mpi_process.h"
#include "model/mpi_step_channel.h"
#endif

namespace inflight::backend {
namespace {

// The leader's limit for delivering one step to the followers (model/mpi_step_channel.h). Steps
// are small and the followers wait for them, so only a follower that stopped taking messages
// gets near it.
constexpr std::chrono::milliseconds kStepSendTimeout{60'000};

bool OrchestratorRequested() {
  const char* value = std::getenv("TRTLLM_ORCHESTRATOR");
  return value != nullptr && std::string(value) == "1";
}

std::string EngineRanks(const model::EngineConfig& engine) {
  return "tp_size " + std::to_string(engine.tp_size) + " x pp_size " +
         std::to_string(engine.pp_size) + " = " + std::to_string(engine.tp_size * engine.pp_size) +
         " ranks";
}

// Checks that the engine splits over exactly the world's ranks.
Status CheckWorldFitsEngine(const ModelState& model, const model::EngineConfig& engine,
                            const MpiLaunch& world) {
  const int ranks = engine.tp_size * engine.pp_size;
  if (ranks == world.size) return Status::Ok();
  const std::string how = ranks == 1 ? "start the server without mpirun, or with mpirun -n 1"
                                     : "start the server with mpirun -n " + std::to_string(ranks) +
                                           " (launch_server.py --world_size " +
                                           std::to_string(ranks) + ")";
  return InvalidArgument("model '" + model.name() + "': the engine " + model.engine_dir() +
                         " has " + EngineRanks(engine) + ", but the MPI world size is " +
                         std::to_string(world.size) + "; " + how);
}

#ifdef INFLIGHT_BACKEND_MPI
// One leader-mode group per process: every rank of the world runs it, so a second model or
// instance would need a second world.
std::atomic<bool> group_taken{false};

Status CheckParticipants(const config::LlmParams& p, const MpiLaunch& world) {
  if (!p.participant_ids || p.participant_ids->empty()) return Status::Ok();
  const std::vector<std::int32_t>& ids = p.participant_ids->front();
  bool all = static_cast<int>(ids.size()) == world.size;
  for (std::size_t i = 0; all && i < ids.size(); ++i) all = ids[i] == static_cast<int>(i);
  if (all) return Status::Ok();
  std::string given;
  for (std::int32_t id : ids) given += (given.empty() ? "" : ",") + std::to_string(id);
  return Unsupported("participant_ids \"" + given +
                     "\" is not supported: in leader mode every rank of the MPI world (0.." +
                     std::to_string(world.size - 1) +
                     ") runs the model; leave participant_ids unset or list them all");
}

[[noreturn]] void EndFollower(const Status& outcome, int rank) {
  if (outcome.ok()) {
    LOG_INFO("rank {}: the leader stopped the model; this rank exits", rank);
  } else {
    LOG_ERROR("rank {}: {}; ending the MPI job", rank, outcome.ToString());
  }
  spdlog::default_logger()->flush();
  if (!outcome.ok()) MPI_Abort(MPI_COMM_WORLD, 1);
  // NOTE: MPI_Finalize waits for the leader's (at its exit): a rank that leaves without it makes
  // mpirun end the job as failed. The rank then exits without unwinding the server, whose loading
  // thread this is (_exit: no static destructors under running threads).
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  std::fflush(nullptr);
  _exit(0);
}

// This rank's runner over its shard, with the group's collectives. Its CUDA device is
// gpu_device_ids' entry for its rank on its host (the instance's first group), else that rank
// modulo the visible devices (group_collectives.h).
Result<std::unique_ptr<model::ModelRunner>> LoadRank(const ModelState& model,
                                                     const MpiLaunch& world) {
  // Collective: first, before anything that could fail on one rank only and leave the others
  // waiting in it.
  ASSIGN_OR_RETURN(const model::NodeLayout layout, model::NodeLayoutOf(MPI_COMM_WORLD));
  if (model.params().num_nodes) {
    RETURN_IF_ERROR(model::CheckNumNodes(*model.params().num_nodes, layout, world.size,
                                         "model '" + model.name() + "'"));
  }
  ASSIGN_OR_RETURN(model::EngineConfig engine, model::LoadEngineConfig(model.engine_dir()));
  RETURN_IF_ERROR(CheckWorldFitsEngine(model, engine, world));
  RETURN_IF_ERROR(CheckParticipants(model.params(), world));
  LOG_INFO("model {}: rank {} of {} loads its part of the engine ({})", model.name(), world.rank,
           world.size, EngineRanks(engine));
  const ExecutorConfig config = model.MakeExecutorConfig();
  ASSIGN_OR_RETURN(std::shared_ptr<model::Collectives> collectives,
                   CreateGroupCollectives(MPI_COMM_WORLD, engine, config, layout.local_rank));
  return executor::CreateModelRunner(model.engine_dir(), engine, config, std::move(collectives));
}

// Every rank of the world comes here, whatever goes wrong on it, so that rank 0 learns of every
// rank's failure (mpi_load_report.h) and nobody waits for a rank that gave up.
Result<std::unique_ptr<Executor>> StartGroupRank(const ModelState& model, const MpiLaunch& world) {
  if (group_taken.exchange(true)) {
    return Unsupported("model '" + model.name() +
                       "': a second tensorrt_llm instance in one leader-mode MPI world (an "
                       "instance_group count above 1, a second model, or a reload after an "
                       "unload, whose followers have exited) is not supported: restart the job, "
                       "or use orchestrator mode (TRTLLM_ORCHESTRATOR=1) for several models");
  }
  RETURN_IF_ERROR(model::EnsureMpiInitialized());
  int mpi_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  if (mpi_size != world.size) {
    return Internal("MPI_COMM_WORLD has " + std::to_string(mpi_size) + " ranks, but " +
                    world.source + " says " + std::to_string(world.size));
  }
  // The steps have a communicator of their own (the collectives duplicate theirs), so their
  // messages never match another's.
  MPI_Comm step_comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &step_comm);
  auto channel = std::make_unique<model::MpiStepChannel>(step_comm, kStepSendTimeout);

  Result<std::unique_ptr<model::ModelRunner>> runner = LoadRank(model, world);
  const Result<std::int64_t> local_blocks =
      runner.ok() ? Result<std::int64_t>((*runner)->num_kv_blocks()) : runner.status();
  Result<std::int64_t> group_blocks = model::GatherLoadResults(MPI_COMM_WORLD, local_blocks);

  if (world.rank != 0) {
    // The leader refuses the model when any rank failed, and sends stop either way.
    if (!runner.ok()) LOG_ERROR("rank {}: {}", world.rank, runner.status().ToString());
    Status outcome = model::RunFollower(runner.ok() ? runner->get() : nullptr, *channel);
    if (runner.ok()) runner->reset();
    channel.reset();
    EndFollower(outcome, world.rank);
  }
  if (!group_blocks.ok()) {
    if (Status st = channel->Send(model::EncodeStop()); !st.ok()) {
      LOG_ERROR("model {}: could not tell the follower ranks to stop: {}", model.name(),
                st.ToString());
    }
    return group_blocks.status();
  }
  auto leader = std::make_unique<model::LeaderRunner>(std::move(runner).value(), std::move(channel),
                                                      *group_blocks);
  LOG_INFO("model {}: leader of {} ranks; KV pool {} blocks (the smallest of the group's)",
           model.name(), world.size, leader->num_kv_blocks());
  return Executor::CreateWithRunner(model.MakeExecutorConfig(), std::move(leader));
}
#endif

}  // namespace

Result<std::unique_ptr<Executor>> StartExecutor(const ModelState& model) {
  if (OrchestratorRequested()) {
#ifdef INFLIGHT_BACKEND_MPI
    ASSIGN_OR_RETURN(MpiLaunch world, MpiLaunchFromEnvironment());
    if (world.size != 1) {
      return InvalidArgument(
          "TRTLLM_ORCHESTRATOR=1 (orchestrator mode) spawns the workers itself, so the server must "
          "run as one process; the MPI world size is " +
          std::to_string(world.size) +
          " (use mpirun -n 1, or launch_server.py --multi-model "
          "--world_size 1)");
    }
    const char* spawn = std::getenv("TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES");
    if (spawn != nullptr && std::string(spawn) == "0") {
      return Unsupported(
          "TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES=0 (launch_server.py --disable-spawn-processes) is "
          "not supported: in orchestrator mode the backend spawns its workers; unset it");
    }
    return StartOrchestratedInstance(model, model.TakeInstanceIndex());
#else
    return Unsupported(
        "TRTLLM_ORCHESTRATOR=1 (orchestrator mode) needs MPI, and this backend was built without "
        "it (apt-get install libopenmpi-dev and rebuild)");
#endif
  }
  ASSIGN_OR_RETURN(MpiLaunch world, MpiLaunchFromEnvironment());
  if (world.size == 1) {
    ASSIGN_OR_RETURN(model::EngineConfig engine, model::LoadEngineConfig(model.engine_dir()));
    RETURN_IF_ERROR(CheckWorldFitsEngine(model, engine, world));
    return Executor::Create(model.engine_dir(), model.MakeExecutorConfig());
  }
#ifdef INFLIGHT_BACKEND_MPI
  return StartGroupRank(model, world);
#else
  return Unsupported("model '" + model.name() + "': the MPI world size is " +
                     std::to_string(world.size) +
                     ", but this backend was built without MPI (apt-get install libopenmpi-dev "
                     "and rebuild), so it runs engines of one rank only, in one process");
#endif
}

}  // namespace inflight::backend
