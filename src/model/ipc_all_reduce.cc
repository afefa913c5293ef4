#include "model/ipc_all_reduce.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "model/mpi_node_layout.h"

namespace inflight::model {
namespace {

namespace kc = kernels::cuda;

Status Mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return Internal(std::string("IPC all-reduce setup: ") + what +
                  " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

// "" when `rc` is success, else what failed (the runtime's error is cleared: it is an answer here).
std::string CudaWhy(cudaError_t rc, const std::string& what) {
  if (rc == cudaSuccess) return "";
  cudaGetLastError();
  return what + " failed: " + cudaGetErrorString(rc);
}

// Every rank's `mine` ("" = fine) becomes one answer on all ranks: "" when every rank is fine,
// else the lowest failing rank's reason, prefixed with its rank.
Result<std::string> Agree(MPI_Comm group, int rank, int size, const std::string& mine) {
  int bad = mine.empty() ? size : rank;
  RETURN_IF_ERROR(Mpi(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MIN, group),
                      "MPI_Allreduce of the ranks' answers"));
  if (bad == size) return std::string();
  std::array<char, 512> text{};
  if (rank == bad) {
    const std::string s = "tp rank " + std::to_string(rank) + ": " + mine;
    std::memcpy(text.data(), s.data(), std::min(s.size(), text.size() - 1));
  }
  RETURN_IF_ERROR(Mpi(MPI_Bcast(text.data(), static_cast<int>(text.size()), MPI_CHAR, bad, group),
                      "MPI_Bcast of the failing rank's reason"));
  text.back() = '\0';
  return std::string(text.data());
}

}  // namespace

Result<std::unique_ptr<IpcAllReduce>> IpcAllReduce::Create(MPI_Comm group, int device,
                                                           std::int64_t capacity_bytes,
                                                           std::string* why_not) {
  int rank = 0, size = 0;
  RETURN_IF_ERROR(Mpi(MPI_Comm_rank(group, &rank), "MPI_Comm_rank"));
  RETURN_IF_ERROR(Mpi(MPI_Comm_size(group, &size), "MPI_Comm_size"));
  if (size < 2 || size > kc::kIpcMaxRanks) {
    *why_not = std::to_string(size) + " tp ranks (IPC takes 2 to " +
               std::to_string(kc::kIpcMaxRanks) + ")";
    return std::unique_ptr<IpcAllReduce>();
  }
  // CUDA IPC maps the memory of processes on this host only, and a peer's PCI bus id below could
  // name a device of this host by coincidence: ranks on several hosts keep NCCL.
  ASSIGN_OR_RETURN(const NodeLayout layout, NodeLayoutOf(group));
  if (layout.num_nodes != 1) {
    *why_not = "the " + std::to_string(size) + " tp ranks run on " +
               std::to_string(layout.num_nodes) + " hosts";
    return std::unique_ptr<IpcAllReduce>();
  }
  std::unique_ptr<IpcAllReduce> ar(new IpcAllReduce());
  ar->device_ = device;
  ar->peers_.rank = rank;
  ar->peers_.num_ranks = size;
  ar->peers_.capacity_bytes = (std::max<std::int64_t>(capacity_bytes, 16) + 15) / 16 * 16;

  // 1. Can this process reach every peer's device? Devices are named by PCI bus id: each process
  //    numbers the visible devices its own way.
  constexpr int kIdLength = 32;
  std::vector<char> ids(static_cast<std::size_t>(size) * kIdLength, '\0');
  std::string why =
      CudaWhy(cudaDeviceGetPCIBusId(ids.data() + static_cast<std::ptrdiff_t>(rank) * kIdLength,
                                    kIdLength, device),
              "cudaDeviceGetPCIBusId");
  RETURN_IF_ERROR(
      Mpi(MPI_Allgather(MPI_IN_PLACE, kIdLength, MPI_CHAR, ids.data(), kIdLength, MPI_CHAR, group),
          "MPI_Allgather of the PCI bus ids"));
  for (int r = 0; r < size && why.empty(); ++r) {
    if (r == rank) continue;
    const std::string id(ids.data() + static_cast<std::ptrdiff_t>(r) * kIdLength);
    int peer = -1;
    if (cudaDeviceGetByPCIBusId(&peer, id.c_str()) != cudaSuccess) {
      cudaGetLastError();
      why = "tp rank " + std::to_string(r) + "'s device " + id + " is not visible here";
      break;
    }
    if (peer == device) {
      why = "tp rank " + std::to_string(r) + " runs on the same device " + id;
      break;
    }
    int can = 0;
    why = CudaWhy(cudaDeviceCanAccessPeer(&can, device, peer), "cudaDeviceCanAccessPeer");
    if (why.empty() && can == 0) {
      why = "device " + std::to_string(device) + " has no peer access to device " +
            std::to_string(peer) + " (" + id + ")";
    }
    if (why.empty()) {
      const cudaError_t rc = cudaDeviceEnablePeerAccess(peer, 0);
      if (rc != cudaErrorPeerAccessAlreadyEnabled) why = CudaWhy(rc, "cudaDeviceEnablePeerAccess");
      cudaGetLastError();
    }
  }
  ASSIGN_OR_RETURN(*why_not, Agree(group, rank, size, why));
  if (!why_not->empty()) return std::unique_ptr<IpcAllReduce>();

  // 2. This rank's area, zeroed (signals start at 0, as the counters do), and its handle.
  cudaIpcMemHandle_t handle{};
  why = CudaWhy(cudaMalloc(&ar->own_area_, kc::IpcAreaBytes(ar->peers_.capacity_bytes)),
                "cudaMalloc of the IPC area");
  if (why.empty()) {
    why = CudaWhy(cudaMemset(ar->own_area_, 0, kc::IpcAreaBytes(ar->peers_.capacity_bytes)),
                  "cudaMemset of the IPC area");
  }
  if (why.empty()) {
    why = CudaWhy(cudaMalloc(&ar->counters_, sizeof(kc::IpcCounters)), "cudaMalloc (counters)");
  }
  if (why.empty()) {
    why = CudaWhy(cudaMemset(ar->counters_, 0, sizeof(kc::IpcCounters)), "cudaMemset (counters)");
  }
  if (why.empty()) {
    why = CudaWhy(
        cudaHostAlloc(reinterpret_cast<void**>(&ar->abort_host_), sizeof(int), cudaHostAllocMapped),
        "cudaHostAlloc (abort flag)");
  }
  void* abort_device = nullptr;
  if (why.empty()) {
    *ar->abort_host_ = 0;
    why = CudaWhy(cudaHostGetDevicePointer(&abort_device, ar->abort_host_, 0),
                  "cudaHostGetDevicePointer (abort flag)");
  }
  if (why.empty())
    why = CudaWhy(cudaIpcGetMemHandle(&handle, ar->own_area_), "cudaIpcGetMemHandle");
  if (why.empty()) why = CudaWhy(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  ASSIGN_OR_RETURN(*why_not, Agree(group, rank, size, why));
  if (!why_not->empty()) return std::unique_ptr<IpcAllReduce>();

  // 3. Every rank's handle; map the peers' areas.
  std::vector<cudaIpcMemHandle_t> handles(static_cast<std::size_t>(size));
  handles[static_cast<std::size_t>(rank)] = handle;
  RETURN_IF_ERROR(Mpi(MPI_Allgather(MPI_IN_PLACE, sizeof(handle), MPI_BYTE, handles.data(),
                                    sizeof(handle), MPI_BYTE, group),
                      "MPI_Allgather of the IPC handles"));
  for (int r = 0; r < size && why.empty(); ++r) {
    if (r == rank) {
      ar->peers_.areas[r] = ar->own_area_;
      continue;
    }
    void* mapped = nullptr;
    why = CudaWhy(cudaIpcOpenMemHandle(&mapped, handles[static_cast<std::size_t>(r)],
                                       cudaIpcMemLazyEnablePeerAccess),
                  "cudaIpcOpenMemHandle of tp rank " + std::to_string(r) + "'s area");
    if (why.empty()) {
      ar->opened_.push_back(mapped);
      ar->peers_.areas[r] = mapped;
    }
  }
  ASSIGN_OR_RETURN(*why_not, Agree(group, rank, size, why));
  if (!why_not->empty()) return std::unique_ptr<IpcAllReduce>();
  ar->peers_.counters = ar->counters_;
  ar->peers_.abort = static_cast<const volatile int*>(abort_device);
  // NOTE: every area is zeroed (synchronised above) before any rank may write a peer's flags.
  RETURN_IF_ERROR(Mpi(MPI_Barrier(group), "MPI_Barrier after mapping the areas"));
  return ar;
}

// NOTE: no collective here (a rank may tear down alone, e.g. after a failed load). A peer still
// reading this rank's area is inside a kernel that has passed its last barrier with us, so it ends
// within microseconds, long before a runner's teardown reaches this point.
IpcAllReduce::~IpcAllReduce() {
  cudaSetDevice(device_);
  for (void* p : opened_) cudaIpcCloseMemHandle(p);
  if (own_area_ != nullptr) cudaFree(own_area_);
  if (counters_ != nullptr) cudaFree(counters_);
  if (abort_host_ != nullptr) cudaFreeHost(abort_host_);
}

Status IpcAllReduce::Run(void* inout, std::int64_t count, DType dtype,
                         kc::IpcAllReduceAlgorithm algorithm, cudaStream_t stream) {
  const cudaError_t rc = kc::IpcAllReduce(peers_, inout, count, dtype, algorithm, stream);
  if (rc == cudaSuccess) return Status::Ok();
  return Internal(std::string("AllReduceSum (IPC ") +
                  (algorithm == kc::IpcAllReduceAlgorithm::kTwoShot ? "two" : "one") + "-shot, " +
                  std::to_string(count) + " x " + DTypeName(dtype) +
                  "): " + cudaGetErrorString(rc));
}

void IpcAllReduce::Abort() {
  if (abort_host_ != nullptr) {
    *reinterpret_cast<volatile int*>(abort_host_) = 1;
  }
}

}  // namespace inflight::model
