// inflight-executor-worker: one rank of a model instance in orchestrator mode
// (model/mpi_orchestrator.h). The inflight backend spawns tp_size x pp_size of them with
// MPI_Comm_spawn (NVIDIA's trtllmExecutorWorker has the same role); each loads its shard with the
// collectives of the workers' own MPI world, then steps on what the server sends until it says
// stop. The workers' rank 0 sends each step's output back.
//
//   inflight-executor-worker --engine_dir=DIR [--device=auto|cpu|cuda] [--gpu_device_ids=0,1]
//       [--max_tokens_in_paged_kv_cache=N] [--kv_cache_free_gpu_mem_fraction=F]
//       [--max_attention_window_size=W,...] [--sink_token_length=N]
#include <mpi.h>

#include <charconv>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend/group_collectives.h"
#include "common/logging.h"
#include "executor/runner_factory.h"
#include "model/engine_config.h"
#include "model/mpi_load_report.h"
#include "model/mpi_node_layout.h"
#include "model/mpi_orchestrator.h"
#include "model/mpi_process.h"
#include "model/mpi_step_channel.h"

namespace {

using inflight::InvalidArgument;
using inflight::Result;
using inflight::Status;

template <typename T>
Result<T> ParseNumber(const std::string& key, const std::string& text) {
  T value{};
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return InvalidArgument("--" + key + "=" + text + " is not a number");
  }
  return value;
}

Result<std::vector<int>> ParseList(const std::string& key, const std::string& text) {
  std::vector<int> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    ASSIGN_OR_RETURN(int v, ParseNumber<int>(key, text.substr(start, comma - start)));
    values.push_back(v);
    start = comma + 1;
  }
  return values;
}

struct WorkerOptions {
  std::string engine_dir;
  inflight::ExecutorConfig config;
};

Result<WorkerOptions> ParseOptions(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
      return InvalidArgument("argument \"" + arg + "\" is not --key=value");
    }
    flags[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
  }
  WorkerOptions o;
  for (const auto& [key, value] : flags) {
    if (key == "engine_dir") {
      o.engine_dir = value;
    } else if (key == "device") {
      if (value == "cpu") {
        o.config.device = inflight::DeviceKind::kCpu;
      } else if (value == "cuda") {
        o.config.device = inflight::DeviceKind::kCuda;
      } else if (value != "auto") {
        return InvalidArgument("--device=" + value + " is not one of: auto, cpu, cuda");
      }
    } else if (key == "gpu_device_ids") {
      ASSIGN_OR_RETURN(o.config.gpu_device_ids, ParseList(key, value));
    } else if (key == "max_tokens_in_paged_kv_cache") {
      ASSIGN_OR_RETURN(o.config.kv_cache_config.max_tokens, ParseNumber<std::int64_t>(key, value));
    } else if (key == "kv_cache_free_gpu_mem_fraction") {
      ASSIGN_OR_RETURN(o.config.kv_cache_config.free_gpu_memory_fraction,
                       ParseNumber<float>(key, value));
    } else if (key == "max_attention_window_size") {
      ASSIGN_OR_RETURN(std::vector<int> windows, ParseList(key, value));
      o.config.kv_cache_config.max_attention_window =
          std::vector<inflight::SizeType>(windows.begin(), windows.end());
    } else if (key == "sink_token_length") {
      ASSIGN_OR_RETURN(o.config.kv_cache_config.sink_token_length,
                       ParseNumber<inflight::SizeType>(key, value));
    } else {
      return InvalidArgument(
          "unknown option --" + key +
          "; accepted: engine_dir, device, gpu_device_ids, max_tokens_in_paged_kv_cache, "
          "kv_cache_free_gpu_mem_fraction, max_attention_window_size, sink_token_length");
    }
  }
  if (o.engine_dir.empty()) return InvalidArgument("--engine_dir is required");
  return o;
}

// This worker's runner: its rank's shard, with the workers' collectives.
Result<std::unique_ptr<inflight::model::ModelRunner>> LoadShard(const WorkerOptions& o, int size) {
  namespace model = inflight::model;
  // Collective: first, before anything that could fail on one worker only.
  model::NodeLayout layout;
  if (size > 1) {
    ASSIGN_OR_RETURN(layout, model::NodeLayoutOf(MPI_COMM_WORLD));
  }
  ASSIGN_OR_RETURN(model::EngineConfig engine, model::LoadEngineConfig(o.engine_dir));
  if (engine.tp_size * engine.pp_size != size) {
    return InvalidArgument("the engine " + o.engine_dir + " has tp_size " +
                           std::to_string(engine.tp_size) + " x pp_size " +
                           std::to_string(engine.pp_size) + " ranks, but " + std::to_string(size) +
                           " workers were spawned");
  }
  // One worker runs the whole engine, with no one to talk to. Its CUDA device: --gpu_device_ids'
  // entry for its rank on its host, else that rank (group_collectives.h).
  std::shared_ptr<model::Collectives> collectives;
  if (size > 1) {
    ASSIGN_OR_RETURN(collectives, inflight::backend::CreateGroupCollectives(
                                      MPI_COMM_WORLD, engine, o.config, layout.local_rank));
  }
  return inflight::executor::CreateModelRunner(o.engine_dir, engine, o.config,
                                               std::move(collectives));
}

int Run(int argc, char** argv) {
  namespace model = inflight::model;
  if (Status st = model::EnsureMpiInitialized(); !st.ok()) {
    LOG_ERROR("inflight-executor-worker: {}", st.ToString());
    return 1;
  }
  Result<model::SpawnedGroup> server = model::JoinServer();
  if (!server.ok()) {
    LOG_ERROR("inflight-executor-worker: {}", server.status().message());
    return 1;
  }
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // The same order of communicator creation as the server's (backend/orchestrator_mode.cc).
  MPI_Comm step_comm = MPI_COMM_NULL;
  MPI_Comm_dup(server->joined, &step_comm);
  auto channel =
      std::make_unique<model::MpiStepChannel>(step_comm, std::chrono::milliseconds(60'000));

  Result<WorkerOptions> options = ParseOptions(argc, argv);
  Result<std::unique_ptr<model::ModelRunner>> runner =
      options.ok() ? LoadShard(*options, size) : options.status();
  const Result<std::int64_t> blocks =
      runner.ok() ? Result<std::int64_t>((*runner)->num_kv_blocks()) : runner.status();
  if (!runner.ok()) LOG_ERROR("worker {}: {}", rank, runner.status().ToString());
  (void)model::GatherLoadResults(server->joined, blocks);

  MPI_Comm output_comm = server->joined;
  std::function<Status(const Result<model::StepOutput>&)> send_output;
  if (rank == 0) {
    send_output = [output_comm](const Result<model::StepOutput>& out) {
      return model::SendStepResult(output_comm, out);
    };
  }
  Status outcome = model::RunFollower(runner.ok() ? runner->get() : nullptr, *channel, send_output);
  if (!outcome.ok()) {
    LOG_ERROR("worker {}: {}; ending the MPI job", rank, outcome.ToString());
    spdlog::default_logger()->flush();
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (runner.ok()) runner->reset();
  channel.reset();
  server->Disconnect();
  model::FinalizeMpiIfOurs();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return Run(argc, argv);
}
