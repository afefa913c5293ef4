#include "model/nccl_collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "model/ipc_all_reduce.h"

namespace inflight::model {
namespace {

Status NcclStatus(ncclResult_t rc, const std::string& what) {
  if (rc == ncclSuccess) return Status::Ok();
  return Internal(what + " failed: " + ncclGetErrorString(rc) + " (" + ncclGetLastError(nullptr) +
                  ")");
}

Status CudaCall(cudaError_t rc, const std::string& what) {
  if (rc == cudaSuccess) return Status::Ok();
  return Internal(what + " failed: " + cudaGetErrorString(rc));
}

Status MpiCall(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return Internal(what + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

Result<ncclDataType_t> NcclType(DType dtype, const char* what) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kInt32:
      return ncclInt32;
    default:
      return InvalidArgument(std::string(what) + ": dtype " + DTypeName(dtype) +
                             " is not one of: float32, float16, bfloat16, int32");
  }
}

// A communicator of `size` ranks among the members of `group` (an MPI communicator of exactly
// those processes, ordered by their rank in the NCCL one): its rank 0 makes the unique id and
// broadcasts it.
Status InitComm(MPI_Comm group, int size, int rank, ncclComm_t* comm, const char* what) {
  ncclUniqueId id;
  if (rank == 0) RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  RETURN_IF_ERROR(MpiCall(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group),
                          std::string("MPI_Bcast of the NCCL id of the ") + what));
  return NcclStatus(ncclCommInitRank(comm, size, id, rank),
                    std::string("ncclCommInitRank of the ") + what);
}

class NcclCollectives final : public Collectives {
 public:
  NcclCollectives(std::int32_t tp_size, std::int32_t pp_size, int device,
                  const NcclCollectivesOptions& options, AllReduceMode mode)
      : tp_size_(tp_size),
        pp_size_(pp_size),
        device_(device),
        timeout_seconds_(options.timeout_seconds),
        options_(options),
        mode_(mode) {}
  std::optional<int> device() const override { return device_; }
  ~NcclCollectives() override {
    cudaSetDevice(device_);
    ipc_.reset();
    for (ncclComm_t c : {tp_comm_, pp_comm_}) {
      if (c == nullptr) continue;
      // NOTE: after an abort the communicator is already gone.
      if (broken_.ok()) ncclCommDestroy(c);
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      for (MPI_Comm* c : {&tp_mpi_, &pp_mpi_, &group_mpi_}) {
        if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
      }
    }
  }

  Status Init(MPI_Comm comm);

  std::int32_t tp_rank() const override { return tp_rank_; }
  std::int32_t tp_size() const override { return tp_size_; }
  std::int32_t pp_rank() const override { return pp_rank_; }
  std::int32_t pp_size() const override { return pp_size_; }

  Status AllReduceSum(void* buffer, std::int64_t count, DType dtype, void* stream) override {
    RETURN_IF_ERROR(Usable("AllReduceSum", stream));
    if (tp_size_ == 1 || count == 0) return Status::Ok();
    if (dtype == DType::kInt32) {
      return InvalidArgument("AllReduceSum: dtype int32 is not one of: float32, float16, bfloat16");
    }
    ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(dtype, "AllReduceSum"));
    const std::int64_t bytes = count * static_cast<std::int64_t>(DTypeSize(dtype));
    const bool aligned = reinterpret_cast<std::uintptr_t>(buffer) % 16 == 0;
    const AllReducePath path = ChooseAllReducePath(
        mode_, bytes, tp_size_, ipc_ ? ipc_->capacity_bytes() : 0, aligned, options_.thresholds);
    if (path != AllReducePath::kNccl) {
      return ipc_->Run(buffer, count, dtype,
                       path == AllReducePath::kIpcTwoShot
                           ? kernels::cuda::IpcAllReduceAlgorithm::kTwoShot
                           : kernels::cuda::IpcAllReduceAlgorithm::kOneShot,
                       static_cast<cudaStream_t>(stream));
    }
    return NcclStatus(ncclAllReduce(buffer, buffer, static_cast<std::size_t>(count), type, ncclSum,
                                    tp_comm_, static_cast<cudaStream_t>(stream)),
                      "AllReduceSum (ncclAllReduce)");
  }
  Status AllGatherColumns(float* logits, std::int64_t rows, std::int64_t cols,
                          std::int64_t col_begin, std::int64_t col_end, void* stream) override;
  Status SendToNextStage(const void* buffer, std::int64_t count, DType dtype,
                         void* stream) override {
    if (pp_rank_ + 1 >= pp_size_)
      return InvalidArgument("SendToNextStage: the last stage has none");
    return Send("SendToNextStage", buffer, count, dtype, stream, pp_rank_ + 1);
  }
  Status ReceiveFromPreviousStage(void* buffer, std::int64_t count, DType dtype,
                                  void* stream) override {
    if (pp_rank_ == 0) return InvalidArgument("ReceiveFromPreviousStage: the first stage has none");
    return Receive("ReceiveFromPreviousStage", buffer, count, dtype, stream, pp_rank_ - 1);
  }
  Status SendToFirstStage(const void* buffer, std::int64_t count, DType dtype,
                          void* stream) override {
    if (pp_size_ == 1 || pp_rank_ != pp_size_ - 1) {
      return InvalidArgument(
          "SendToFirstStage: only the last of several stages sends to the first");
    }
    return Send("SendToFirstStage", buffer, count, dtype, stream, 0);
  }
  Status ReceiveFromLastStage(void* buffer, std::int64_t count, DType dtype,
                              void* stream) override {
    if (pp_size_ == 1 || pp_rank_ != 0) {
      return InvalidArgument(
          "ReceiveFromLastStage: only the first of several stages receives from the last");
    }
    return Receive("ReceiveFromLastStage", buffer, count, dtype, stream, pp_size_ - 1);
  }
  Status CheckWait(double waited_seconds) override;
  void Progress() override {
    // An unmatched probe: Open MPI's probe runs its progress engine, moving every pending transfer
    // of this process (the leader's step broadcasts included).
    int flag = 0;
    if (group_mpi_ != MPI_COMM_NULL) {
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, group_mpi_, &flag, MPI_STATUS_IGNORE);
    }
  }

 private:
  Status Usable(const char* what, void* stream) const {
    if (!broken_.ok()) return broken_;
    if (stream == nullptr) {
      return InvalidArgument(std::string(what) +
                             ": NCCL collectives are queued on a CUDA stream; got none (the CPU "
                             "runner's collectives are MPI's, mpi_collectives.h)");
    }
    return Status::Ok();
  }
  Status Send(const char* what, const void* buffer, std::int64_t count, DType dtype, void* stream,
              int peer) {
    RETURN_IF_ERROR(Usable(what, stream));
    if (count == 0) return Status::Ok();
    ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(dtype, what));
    return NcclStatus(ncclSend(buffer, static_cast<std::size_t>(count), type, peer, pp_comm_,
                               static_cast<cudaStream_t>(stream)),
                      std::string(what) + " (ncclSend)");
  }
  Status Receive(const char* what, void* buffer, std::int64_t count, DType dtype, void* stream,
                 int peer) {
    RETURN_IF_ERROR(Usable(what, stream));
    if (count == 0) return Status::Ok();
    ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(dtype, what));
    return NcclStatus(ncclRecv(buffer, static_cast<std::size_t>(count), type, peer, pp_comm_,
                               static_cast<cudaStream_t>(stream)),
                      std::string(what) + " (ncclRecv)");
  }
  // Every tp rank's column range for `cols` columns: exchanged over MPI the first time (a host
  // exchange, once per width, outside any stream), then cached, so that later calls queue only
  // device work. Every rank asks for a width at the same step, so they exchange together.
  Result<const std::vector<std::int64_t>*> Ranges(std::int64_t cols, std::int64_t col_begin,
                                                  std::int64_t col_end);
  void Abort(Status why) {
    broken_ = std::move(why);
    if (ipc_) ipc_->Abort();  // kernels spinning on a dead peer's flags give up
    for (ncclComm_t c : {tp_comm_, pp_comm_}) {
      if (c != nullptr) ncclCommAbort(c);
    }
  }

  const std::int32_t tp_size_, pp_size_;
  const int device_;
  const double timeout_seconds_;
  const NcclCollectivesOptions options_;
  const AllReduceMode mode_;
  std::unique_ptr<IpcAllReduce> ipc_;  // null: every all-reduce on NCCL
  std::int32_t tp_rank_ = 0, pp_rank_ = 0;
  MPI_Comm group_mpi_ = MPI_COMM_NULL, tp_mpi_ = MPI_COMM_NULL, pp_mpi_ = MPI_COMM_NULL;
  ncclComm_t tp_comm_ = nullptr;  // this stage's tensor-parallel ranks
  ncclComm_t pp_comm_ = nullptr;  // this tp rank's stages
  Status broken_;
  std::map<std::int64_t, std::vector<std::int64_t>> ranges_;  // by cols: [begin, end) per tp rank
};

Status NcclCollectives::Init(MPI_Comm comm) {
  RETURN_IF_ERROR(
      CudaCall(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")"));
  RETURN_IF_ERROR(MpiCall(MPI_Comm_dup(comm, &group_mpi_), "MPI_Comm_dup of the group"));
  RETURN_IF_ERROR(
      MpiCall(MPI_Comm_set_errhandler(group_mpi_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
  int rank = 0;
  RETURN_IF_ERROR(MpiCall(MPI_Comm_rank(group_mpi_, &rank), "MPI_Comm_rank"));
  tp_rank_ = rank % tp_size_;
  pp_rank_ = rank / tp_size_;
  RETURN_IF_ERROR(MpiCall(MPI_Comm_split(group_mpi_, pp_rank_, tp_rank_, &tp_mpi_),
                          "MPI_Comm_split into tensor-parallel groups"));
  RETURN_IF_ERROR(MpiCall(MPI_Comm_split(group_mpi_, tp_rank_, pp_rank_, &pp_mpi_),
                          "MPI_Comm_split into pipelines"));
  // NOTE: NVLS would create multicast objects (cuMulticastCreate); it must stay off.
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  if (nvls != nullptr && std::strcmp(nvls, "0") != 0) {
    LOG_WARN("NCCL_NVLS_ENABLE={} is overridden to 0: NVLink SHARP multicast is not used", nvls);
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  // Every rank creates its stage's communicator, then its pipeline's: each creation involves only
  // its own members, and all ranks create in the same order.
  if (tp_size_ > 1) {
    RETURN_IF_ERROR(InitComm(tp_mpi_, tp_size_, tp_rank_, &tp_comm_, "tensor-parallel group"));
    if (mode_ != AllReduceMode::kNccl && options_.ipc_capacity_bytes > 0) {
      std::string why_not;
      ASSIGN_OR_RETURN(
          ipc_, IpcAllReduce::Create(tp_mpi_, device_, options_.ipc_capacity_bytes, &why_not));
      if (ipc_ == nullptr) {
        LOG_WARN("all-reduce over CUDA IPC is not available ({}): NCCL sums every message",
                 why_not);
      } else if (tp_rank_ == 0 && pp_rank_ == 0) {
        LOG_INFO("all-reduce: {} (CUDA IPC up to {} bytes per message, NCCL above)",
                 AllReduceModeName(mode_), ipc_->capacity_bytes());
      }
    }
  }
  if (pp_size_ > 1) {
    RETURN_IF_ERROR(InitComm(pp_mpi_, pp_size_, pp_rank_, &pp_comm_, "pipeline"));
  }
  return Status::Ok();
}

Result<const std::vector<std::int64_t>*> NcclCollectives::Ranges(std::int64_t cols,
                                                                 std::int64_t col_begin,
                                                                 std::int64_t col_end) {
  auto it = ranges_.find(cols);
  if (it != ranges_.end()) {
    const std::vector<std::int64_t>& r = it->second;
    if (r[2 * static_cast<std::size_t>(tp_rank_)] != col_begin ||
        r[2 * static_cast<std::size_t>(tp_rank_) + 1] != col_end) {
      return InvalidArgument("AllGatherColumns: this rank's columns of " + std::to_string(cols) +
                             " changed to [" + std::to_string(col_begin) + ", " +
                             std::to_string(col_end) + ") since the ranks exchanged them");
    }
    return &it->second;
  }
  std::vector<std::int64_t> r(2 * static_cast<std::size_t>(tp_size_));
  const std::int64_t mine[2] = {col_begin, col_end};
  RETURN_IF_ERROR(MpiCall(MPI_Allgather(mine, 2, MPI_INT64_T, r.data(), 2, MPI_INT64_T, tp_mpi_),
                          "AllGatherColumns (MPI_Allgather of the ranges)"));
  std::int64_t due = 0;
  for (std::size_t t = 0; t < static_cast<std::size_t>(tp_size_); ++t) {
    if (r[2 * t] != due || r[2 * t + 1] < r[2 * t]) {
      return InvalidArgument("AllGatherColumns: the ranks' column ranges must partition [0, " +
                             std::to_string(cols) + ") in rank order, but tp_rank " +
                             std::to_string(t) + " has [" + std::to_string(r[2 * t]) + ", " +
                             std::to_string(r[2 * t + 1]) + ") where column " +
                             std::to_string(due) + " was due");
    }
    due = r[2 * t + 1];
  }
  if (due != cols) {
    return InvalidArgument("AllGatherColumns: the ranks' column ranges end at " +
                           std::to_string(due) + ", not at cols " + std::to_string(cols));
  }
  return &ranges_.emplace(cols, std::move(r)).first->second;
}

// Each rank's columns are a [rows, width] block inside the row-major logits. They travel packed:
// a 2-D copy gathers this rank's block into a staging buffer, grouped sends and receives swap the
// blocks, and 2-D copies put each peer's block in place. All stream-ordered (the staging buffer
// too: cudaMallocAsync / cudaFreeAsync), so a captured graph holds the whole exchange.
Status NcclCollectives::AllGatherColumns(float* logits, std::int64_t rows, std::int64_t cols,
                                         std::int64_t col_begin, std::int64_t col_end,
                                         void* stream) {
  RETURN_IF_ERROR(Usable("AllGatherColumns", stream));
  if (tp_size_ == 1 || rows == 0) return Status::Ok();
  ASSIGN_OR_RETURN(const std::vector<std::int64_t>* ranges, Ranges(cols, col_begin, col_end));
  auto s = static_cast<cudaStream_t>(stream);
  const std::size_t pitch = static_cast<std::size_t>(cols) * sizeof(float);
  void* staging = nullptr;
  RETURN_IF_ERROR(CudaCall(cudaMallocAsync(&staging, static_cast<std::size_t>(rows * cols) * 4, s),
                           "AllGatherColumns (cudaMallocAsync)"));
  auto* base = static_cast<float*>(staging);
  auto block = [&](std::size_t t) { return base + rows * (*ranges)[2 * t]; };
  auto width = [&](std::size_t t) { return (*ranges)[2 * t + 1] - (*ranges)[2 * t]; };
  const auto me = static_cast<std::size_t>(tp_rank_);
  Status st;
  if (width(me) > 0) {
    st = CudaCall(
        cudaMemcpy2DAsync(block(me), static_cast<std::size_t>(width(me)) * 4, logits + col_begin,
                          pitch, static_cast<std::size_t>(width(me)) * 4,
                          static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, s),
        "AllGatherColumns (pack)");
  }
  if (st.ok()) st = NcclStatus(ncclGroupStart(), "ncclGroupStart");
  if (st.ok()) {
    for (std::size_t t = 0; t < static_cast<std::size_t>(tp_size_) && st.ok(); ++t) {
      if (t == me) continue;
      const int peer = static_cast<int>(t);
      if (width(me) > 0) {
        st = NcclStatus(ncclSend(block(me), static_cast<std::size_t>(rows * width(me)), ncclFloat32,
                                 peer, tp_comm_, s),
                        "AllGatherColumns (ncclSend)");
      }
      if (st.ok() && width(t) > 0) {
        st = NcclStatus(ncclRecv(block(t), static_cast<std::size_t>(rows * width(t)), ncclFloat32,
                                 peer, tp_comm_, s),
                        "AllGatherColumns (ncclRecv)");
      }
    }
    const Status end = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
    if (st.ok()) st = end;
  }
  for (std::size_t t = 0; t < static_cast<std::size_t>(tp_size_) && st.ok(); ++t) {
    if (t == me || width(t) == 0) continue;
    st = CudaCall(cudaMemcpy2DAsync(logits + (*ranges)[2 * t], pitch, block(t),
                                    static_cast<std::size_t>(width(t)) * 4,
                                    static_cast<std::size_t>(width(t)) * 4,
                                    static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, s),
                  "AllGatherColumns (unpack)");
  }
  const Status freed = CudaCall(cudaFreeAsync(staging, s), "AllGatherColumns (cudaFreeAsync)");
  return st.ok() ? freed : st;
}

Status NcclCollectives::CheckWait(double waited_seconds) {
  if (!broken_.ok()) return broken_;
  for (ncclComm_t c : {tp_comm_, pp_comm_}) {
    if (c == nullptr) continue;
    ncclResult_t async = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(c, &async);
    if (rc != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
      const ncclResult_t bad = rc != ncclSuccess ? rc : async;
      Abort(Unavailable(std::string("NCCL reported an error while the step ran (tp_rank ") +
                        std::to_string(tp_rank_) + ", pp_rank " + std::to_string(pp_rank_) +
                        "): " + ncclGetErrorString(bad) +
                        "; a peer failed and the group is not usable any more"));
      return broken_;
    }
  }
  if (timeout_seconds_ > 0 && waited_seconds > timeout_seconds_) {
    Abort(Unavailable("a step waited more than " + std::to_string(timeout_seconds_) +
                      " s for the group's NCCL operations (tp_rank " + std::to_string(tp_rank_) +
                      ", pp_rank " + std::to_string(pp_rank_) +
                      "): a rank died or stopped stepping; the group is not usable any more"));
    return broken_;
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<Collectives>> CreateNcclCollectives(MPI_Comm comm, std::int32_t tp_size,
                                                           std::int32_t pp_size, int device,
                                                           const NcclCollectivesOptions& options) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    return InvalidArgument("CreateNcclCollectives: MPI is not initialised (MPI_Init_thread first)");
  }
  if (tp_size < 1 || pp_size < 1) {
    return InvalidArgument("CreateNcclCollectives: tp_size " + std::to_string(tp_size) +
                           " and pp_size " + std::to_string(pp_size) + " must be >= 1");
  }
  if (comm == MPI_COMM_NULL) return InvalidArgument("CreateNcclCollectives: comm is MPI_COMM_NULL");
  if (!(options.timeout_seconds >= 0)) {
    return InvalidArgument("CreateNcclCollectives: timeout_seconds " +
                           std::to_string(options.timeout_seconds) + " must be >= 0");
  }
  int size = 0;
  RETURN_IF_ERROR(MpiCall(MPI_Comm_size(comm, &size), "MPI_Comm_size"));
  if (static_cast<std::int64_t>(size) != static_cast<std::int64_t>(tp_size) * pp_size) {
    return InvalidArgument("CreateNcclCollectives: the MPI communicator has " +
                           std::to_string(size) + " ranks, but tp_size " + std::to_string(tp_size) +
                           " x pp_size " + std::to_string(pp_size) + " needs " +
                           std::to_string(std::int64_t{tp_size} * pp_size));
  }
  int num_devices = 0;
  if (cudaGetDeviceCount(&num_devices) != cudaSuccess) num_devices = 0;
  if (device < 0 || device >= num_devices) {
    return InvalidArgument("CreateNcclCollectives: CUDA device " + std::to_string(device) +
                           " does not exist; this machine has " + std::to_string(num_devices) +
                           " (accepted: 0 to " + std::to_string(num_devices - 1) + ")");
  }
  ASSIGN_OR_RETURN(const AllReduceMode mode,
                   options.all_reduce.empty()
                       ? ParseAllReduceMode(std::getenv("INFLIGHT_ALLREDUCE"), "INFLIGHT_ALLREDUCE")
                       : ParseAllReduceMode(options.all_reduce.c_str(), "all_reduce"));
  if (options.ipc_capacity_bytes < 0) {
    return InvalidArgument("CreateNcclCollectives: ipc_capacity_bytes " +
                           std::to_string(options.ipc_capacity_bytes) + " must be >= 0");
  }
  auto c = std::make_shared<NcclCollectives>(tp_size, pp_size, device, options, mode);
  RETURN_IF_ERROR(c->Init(comm));
  return std::shared_ptr<Collectives>(std::move(c));
}

}  // namespace inflight::model
