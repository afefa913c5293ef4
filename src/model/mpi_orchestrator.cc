#include "model/mpi_orchestrator.h"

#include <cstring>
#include <limits>

#include "common/logging.h"
#include "model/mpi_wait.h"
#include "model/step_codec.h"

namespace inflight::model {
namespace {

constexpr int kOutputSizeTag = 1;
constexpr int kOutputTag = 2;
constexpr char kResultOutput = 0;
constexpr char kResultError = 1;

}  // namespace

void SpawnedGroup::Disconnect() {
  // NOTE: Open MPI 4's MPI_Comm_disconnect on the merged communicator never returns; on the
  // intercommunicator of the spawn it does (both sides call it).
  if (joined != MPI_COMM_NULL) MPI_Comm_free(&joined);
  if (link != MPI_COMM_NULL) MPI_Comm_disconnect(&link);
}

Result<SpawnedGroup> SpawnWorkers(const std::string& worker_path,
                                  const std::vector<std::string>& args, int num_workers) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  SpawnedGroup group;
  std::vector<int> codes(static_cast<std::size_t>(num_workers), MPI_SUCCESS);
  const int rc = MPI_Comm_spawn(worker_path.c_str(), argv.data(), num_workers, MPI_INFO_NULL, 0,
                                MPI_COMM_SELF, &group.link, codes.data());
  if (rc != MPI_SUCCESS) {
    return Internal("MPI_Comm_spawn of " + std::to_string(num_workers) + " x " + worker_path +
                    " failed: " + MpiErrorText(rc));
  }
  for (int code : codes) {
    if (code != MPI_SUCCESS) {
      return Internal("MPI_Comm_spawn could not start " + worker_path + ": " + MpiErrorText(code));
    }
  }
  MPI_Intercomm_merge(group.link, /*high=*/0, &group.joined);  // the server first: rank 0
  MPI_Comm_set_errhandler(group.joined, MPI_ERRORS_RETURN);
  return group;
}

Result<SpawnedGroup> JoinServer() {
  SpawnedGroup group;
  MPI_Comm_get_parent(&group.link);
  if (group.link == MPI_COMM_NULL) {
    return InvalidArgument(
        "inflight-executor-worker is started by the inflight backend in orchestrator mode "
        "(TRTLLM_ORCHESTRATOR=1) through MPI_Comm_spawn, not by hand");
  }
  MPI_Intercomm_merge(group.link, /*high=*/1, &group.joined);
  MPI_Comm_set_errhandler(group.joined, MPI_ERRORS_RETURN);
  return group;
}

Status SendStepResult(MPI_Comm comm, const Result<StepOutput>& result) {
  // [kind:u8][EncodeStepOutput, or the refusal's code:u8 and message]
  std::string bytes(1, result.ok() ? kResultOutput : kResultError);
  if (result.ok()) {
    bytes += EncodeStepOutput(*result);
  } else {
    bytes += static_cast<char>(result.status().code());
    bytes += result.status().message();
  }
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument("a step output of " + std::to_string(bytes.size()) +
                           " bytes is more than MPI's int count allows");
  }
  const std::uint64_t size = bytes.size();
  MPI_Request requests[2];
  MPI_Isend(&size, sizeof(size), MPI_BYTE, 0, kOutputSizeTag, comm, &requests[0]);
  MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, kOutputTag, comm,
            &requests[1]);
  return WaitForMpiRequests(requests, 2, std::nullopt, "sending a step's output to the server");
}

RemoteGroupRunner::RemoteGroupRunner(EngineConfig config, std::unique_ptr<StepChannel> channel,
                                     SpawnedGroup group, std::int64_t group_kv_blocks,
                                     std::chrono::milliseconds step_timeout)
    : config_(std::move(config)),
      channel_(std::move(channel)),
      group_(group),
      group_kv_blocks_(group_kv_blocks),
      step_timeout_(step_timeout) {}

RemoteGroupRunner::~RemoteGroupRunner() {
  if (!broken_.ok()) return;  // the workers are not where the server is; the job ends with it
  if (Status st = channel_->Send(EncodeStop()); !st.ok()) {
    LOG_ERROR("orchestrator: could not tell the workers to stop: {}", st.ToString());
    return;
  }
  channel_.reset();
  group_.Disconnect();
}

Result<StepOutput> RemoteGroupRunner::Step(const StepInput& input) {
  if (!broken_.ok()) return broken_;
  Status st = channel_->Send(EncodeStep(input, biases_));
  std::string bytes;
  if (st.ok()) {
    // The workers' rank 0 is rank 1 here.
    std::uint64_t size = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Irecv(&size, sizeof(size), MPI_BYTE, 1, kOutputSizeTag, group_.joined, &request);
    st = WaitForMpiRequests(&request, 1, step_timeout_, "the workers' step output");
    if (st.ok()) {
      bytes.resize(size);
      MPI_Irecv(bytes.data(), static_cast<int>(size), MPI_BYTE, 1, kOutputTag, group_.joined,
                &request);
      st = WaitForMpiRequests(&request, 1, step_timeout_, "the workers' step output");
    }
  }
  if (!st.ok()) {
    broken_ = Unavailable("the model's worker processes are unreachable (" + st.message() +
                          "); restart the server to serve this model again");
    LOG_ERROR("orchestrator: {}", broken_.message());
    return broken_;
  }
  if (!bytes.empty() && bytes[0] == kResultError && bytes.size() >= 2) {
    return Status(static_cast<StatusCode>(bytes[1]),
                  "the workers refused the step: " + bytes.substr(2));
  }
  if (bytes.empty() || bytes[0] != kResultOutput) {
    return Internal("the workers' step result of " + std::to_string(bytes.size()) +
                    " bytes has no kind byte 0 or 1");
  }
  return DecodeStepOutput(std::string_view(bytes).substr(1));
}

}  // namespace inflight::model
