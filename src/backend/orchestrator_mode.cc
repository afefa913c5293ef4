#include "backend/orchestrator_mode.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "common/logging.h"
#include "model/engine_config.h"
#include "model/mpi_load_report.h"
#include "model/mpi_orchestrator.h"
#include "model/mpi_process.h"
#include "model/mpi_step_channel.h"

namespace inflight::backend {
namespace {

// A step's output may take long (a long prompt on a slow device); only a group that stopped
// answering gets near this.
constexpr std::chrono::milliseconds kStepTimeout{600'000};
constexpr std::chrono::milliseconds kSendTimeout{60'000};
constexpr const char* kWorkerName = "inflight-executor-worker";

// executor_worker_path, else the worker installed beside this library (backends/inflight/).
Result<std::string> WorkerPath(const config::LlmParams& p) {
  std::string path = p.executor_worker_path;
  if (path.empty()) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&WorkerPath), &info) == 0 || info.dli_fname == nullptr) {
      return Internal("cannot find the inflight backend library's folder to look for " +
                      std::string(kWorkerName) + "; set executor_worker_path");
    }
    path = (std::filesystem::path(info.dli_fname).parent_path() / kWorkerName).string();
  }
  if (access(path.c_str(), X_OK) != 0) {
    return NotFound("executor_worker_path \"" + path +
                    "\" is not an executable file (the orchestrator's worker, " + kWorkerName +
                    ", installed beside libtriton_inflight.so)");
  }
  return path;
}

std::string Join(const std::vector<std::int32_t>& values) {
  std::string out;
  for (std::int32_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// The worker's command line: what CreateModelRunner reads of the executor configuration.
Result<std::vector<std::string>> WorkerArgs(const ModelState& model, int ranks,
                                            int instance_index) {
  const config::LlmParams& p = model.params();
  const ExecutorConfig c = model.MakeExecutorConfig();
  std::vector<std::string> args = {"--engine_dir=" + model.engine_dir()};
  args.push_back(std::string("--device=") + (c.device == DeviceKind::kCpu    ? "cpu"
                                             : c.device == DeviceKind::kCuda ? "cuda"
                                                                             : "auto"));
  if (p.gpu_device_ids && !p.gpu_device_ids->empty()) {
    const auto& groups = *p.gpu_device_ids;
    if (instance_index >= static_cast<int>(groups.size())) {
      return InvalidArgument("gpu_device_ids has " + std::to_string(groups.size()) +
                             " group(s) (\";\"-separated), but this is instance " +
                             std::to_string(instance_index) +
                             " of the model: give one group of devices per instance");
    }
    const std::vector<std::int32_t>& ids = groups[static_cast<std::size_t>(instance_index)];
    if (static_cast<int>(ids.size()) != ranks) {
      return InvalidArgument("gpu_device_ids group \"" + Join(ids) + "\" of instance " +
                             std::to_string(instance_index) + " names " +
                             std::to_string(ids.size()) + " devices, but the engine has " +
                             std::to_string(ranks) + " ranks: list one device per rank");
    }
    args.push_back("--gpu_device_ids=" + Join(ids));
  }
  const KvCacheConfig& kv = c.kv_cache_config;
  if (kv.max_tokens)
    args.push_back("--max_tokens_in_paged_kv_cache=" + std::to_string(*kv.max_tokens));
  if (kv.free_gpu_memory_fraction) {
    args.push_back("--kv_cache_free_gpu_mem_fraction=" +
                   std::to_string(*kv.free_gpu_memory_fraction));
  }
  if (kv.max_attention_window) {
    args.push_back("--max_attention_window_size=" +
                   Join(std::vector<std::int32_t>(kv.max_attention_window->begin(),
                                                  kv.max_attention_window->end())));
  }
  if (kv.sink_token_length) {
    args.push_back("--sink_token_length=" + std::to_string(*kv.sink_token_length));
  }
  return args;
}

}  // namespace

Result<std::unique_ptr<Executor>> StartOrchestratedInstance(const ModelState& model,
                                                            int instance_index) {
  const config::LlmParams& p = model.params();
  if (p.participant_ids && !p.participant_ids->empty()) {
    return Unsupported(
        "participant_ids is not supported in orchestrator mode: the spawned workers "
        "of each instance are its participants; leave participant_ids unset");
  }
  if (p.num_nodes && *p.num_nodes != 1) {
    return Unsupported("num_nodes " + std::to_string(*p.num_nodes) +
                       " is not supported in orchestrator mode: the backend spawns every worker "
                       "on the server's host; accepted: 1, or leader mode (mpirun over the hosts)");
  }
  ASSIGN_OR_RETURN(model::EngineConfig engine, model::LoadEngineConfig(model.engine_dir()));
  const int ranks = engine.tp_size * engine.pp_size;
  ASSIGN_OR_RETURN(std::string worker, WorkerPath(p));
  ASSIGN_OR_RETURN(std::vector<std::string> args, WorkerArgs(model, ranks, instance_index));
  RETURN_IF_ERROR(model::EnsureMpiInitialized());
  LOG_INFO(
      "model {}: instance {} spawns {} worker(s) ({}) for its engine of tp_size {} x pp_size {}",
      model.name(), instance_index, ranks, worker, engine.tp_size, engine.pp_size);
  ASSIGN_OR_RETURN(model::SpawnedGroup group, model::SpawnWorkers(worker, args, ranks));
  // The same order of communicator creation as the workers' (executor_worker_main.cc).
  MPI_Comm step_comm = MPI_COMM_NULL;
  MPI_Comm_dup(group.joined, &step_comm);
  auto channel = std::make_unique<model::MpiStepChannel>(step_comm, kSendTimeout);
  // This process holds no shard: it puts no limit on the group's KV pool.
  Result<std::int64_t> blocks =
      model::GatherLoadResults(group.joined, std::numeric_limits<std::int64_t>::max());
  auto runner = std::make_unique<model::RemoteGroupRunner>(engine, std::move(channel), group,
                                                           blocks.ok() ? *blocks : 0, kStepTimeout);
  if (!blocks.ok()) {
    runner.reset();  // sends the workers stop
    return Status(blocks.status().code(), "model '" + model.name() + "': worker " +
                                              blocks.status().message() +
                                              " (rank 0 of that group is the server)");
  }
  LOG_INFO("model {}: instance {} runs on {} worker(s); KV pool {} blocks", model.name(),
           instance_index, ranks, runner->num_kv_blocks());
  return Executor::CreateWithRunner(model.MakeExecutorConfig(), std::move(runner));
}

}  // namespace inflight::backend
