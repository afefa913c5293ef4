// The host side of the all-reduce over CUDA IPC peer memory (kernels/cuda/ipc_all_reduce.h): each
// rank of a tensor-parallel group allocates its area (signals + double-buffered regions), shares
// it with cudaIpcGetMemHandle, and maps its peers' with cudaIpcOpenMemHandle; the handles travel
// over MPI, as NCCL's unique id does. Peer access is enabled between the ranks' devices. Nothing
// here uses multicast objects (no cuMulticastCreate: NVLink SHARP is not available to us).
//
// Creation is collective over the group and agrees on one answer: when any rank cannot reach a
// peer's device (not visible, the same device, no peer access, an IPC call failed), every rank
// gets null and the reason, and the caller keeps NCCL.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"
#include "kernels/cuda/ipc_all_reduce.h"

namespace inflight::model {

class IpcAllReduce {
 public:
  // Collective over `group` (the tp ranks, in tp rank order); `device` is this rank's CUDA device
  // (current on the calling thread). capacity_bytes: the largest message (rounded up to 16).
  // Ok(null) with *why_not set: IPC is not usable on this group (an expected outcome, not an
  // error). An error: MPI itself failed.
  static Result<std::unique_ptr<IpcAllReduce>> Create(MPI_Comm group, int device,
                                                      std::int64_t capacity_bytes,
                                                      std::string* why_not);
  ~IpcAllReduce();
  IpcAllReduce(const IpcAllReduce&) = delete;
  IpcAllReduce& operator=(const IpcAllReduce&) = delete;

  std::int64_t capacity_bytes() const { return peers_.capacity_bytes; }
  int num_ranks() const { return peers_.num_ranks; }

  // Queues the sum on `stream` (graph-capturable). Every rank makes the same calls in order.
  Status Run(void* inout, std::int64_t count, DType dtype,
             kernels::cuda::IpcAllReduceAlgorithm algorithm, cudaStream_t stream);
  // Makes kernels waiting for a peer give up (the group is broken); later results are garbage,
  // which is why the caller refuses further calls.
  void Abort();

 private:
  IpcAllReduce() = default;

  int device_ = 0;
  kernels::cuda::IpcPeers peers_;
  void* own_area_ = nullptr;
  std::vector<void*> opened_;  // peers' areas mapped by cudaIpcOpenMemHandle
  kernels::cuda::IpcCounters* counters_ = nullptr;
  int* abort_host_ = nullptr;  // cudaHostAllocMapped
};

}  // namespace inflight::model
