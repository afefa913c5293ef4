// Collectives (collectives.h) between GPUs over NCCL, for the CUDA runner: one process per GPU, a
// tp_size x pp_size group started by mpirun (or spawned by an orchestrator), MPI used only to hand
// out NCCL's unique ids at creation. Ranks as in mpi_collectives.h: rank r of `comm` is tp_rank
// r % tp_size of stage r / tp_size.
//
// Every operation is queued on the caller's stream (a cudaStream_t) and returns at once, without a
// host synchronisation, so decode steps that contain them can be captured into CUDA graphs:
// ncclAllReduce over the stage's tensor-parallel communicator; the column gather as grouped
// ncclSend / ncclRecv of each rank's columns (ranges may be uneven); stage hand-overs as ncclSend /
// ncclRecv on the tp rank's pipeline communicator. Buffers are device memory.
//
// Faults: the runner polls CheckWait while it waits for a step; a peer's failure (NCCL's
// asynchronous error) or a wait past the timeout aborts the communicators (ncclCommAbort), so the
// queued kernels end and the step fails with kUnavailable instead of hanging.
//
// All-reduce: small messages go over CUDA IPC peer memory instead (ipc_all_reduce.h: one-shot or
// two-shot kernels that read the peers' buffers directly), where NCCL's fixed latency dominates;
// the choice is by size (all_reduce_choice.h) and INFLIGHT_ALLREDUCE forces either. Without peer
// access between the tp ranks' devices every all-reduce stays on NCCL (logged once).
//
// NVLink SHARP (NVLS) multicast is switched off (NCCL_NVLS_ENABLE=0, set before the communicators
// are created): it needs cuMulticastCreate, which the machines this runs on do not allow.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "model/all_reduce_choice.h"
#include "model/collectives.h"

namespace inflight::model {

struct NcclCollectivesOptions {
  // The longest a runner waits for a step that contains the group's operations; 0: no limit.
  // It must exceed the slowest step. Default 600.
  double timeout_seconds = 600;
  // Which transport sums AllReduceSum (all_reduce_choice.h): auto, nccl, ipc, ipc_oneshot,
  // ipc_twoshot. Empty: the environment's INFLIGHT_ALLREDUCE, else auto.
  std::string all_reduce;
  // The IPC buffers' size per rank and region: the largest message IPC takes. Each rank allocates
  // 4x this (+ 4 KiB). Default 8 MiB; 0: no IPC.
  std::int64_t ipc_capacity_bytes = std::int64_t{8} << 20;
  AllReduceThresholds thresholds;
};

// The collectives of this process in `comm` (size tp_size * pp_size), on CUDA device `device`,
// which becomes the calling thread's current device. Collective over `comm`: every rank calls it.
Result<std::shared_ptr<Collectives>> CreateNcclCollectives(
    MPI_Comm comm, std::int32_t tp_size, std::int32_t pp_size, int device,
    const NcclCollectivesOptions& options = {});

}  // namespace inflight::model
