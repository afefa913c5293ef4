// Collectives (collectives.h) between processes over MPI, for the CPU runner: every rank of a
// tp_size x pp_size group is a process (mpirun -n tp_size*pp_size), each running a CpuModelRunner
// on its rank file. Host buffers only (`stream` must be null).
//
// Ranks follow TensorRT-LLM's order, as ModelShard::file_name: rank r of `comm` is tensor-parallel
// rank r % tp_size of pipeline stage r / tp_size, so the tensor-parallel ranks of one stage are
// adjacent.
//
//   comm rank:   0    1    2    3         tp 2 x pp 2
//   tp_rank:     0    1    0    1         tensor-parallel group of a stage: {0, 1}, {2, 3}
//   pp_rank:     0    0    1    1         pipeline of a tp rank:            {0, 2}, {1, 3}
//
// MPI must be initialised with MPI_Init_thread at MPI_THREAD_SERIALIZED or above: the executor
// steps the runner on a thread of its own, not the one that called MPI_Init. Calls are made by one
// thread at a time (the runner serialises its steps).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "model/collectives.h"

namespace inflight::model {

struct MpiCollectivesOptions {
  // The longest one operation waits for its peers before it fails with kUnavailable (a rank that
  // died or stopped stepping). 0: no limit. A peer's wait includes the compute of the stages
  // before it, so this must exceed the slowest step. Default 600.
  double timeout_seconds = 600;
};

// The collectives of this process in `comm`, whose size must be tp_size * pp_size (both >= 1).
// `comm` is duplicated (and split into the tensor-parallel and pipeline communicators), so the
// group's messages never mix with the caller's; MPI_COMM_WORLD is not used unless it is `comm`.
// MPI errors on those communicators return (MPI_ERRORS_RETURN) and become Status values naming the
// operation. The communicators are freed when the last reference goes, if MPI is not finalised by
// then.
Result<std::shared_ptr<Collectives>> CreateMpiCollectives(
    MPI_Comm comm, std::int32_t tp_size, std::int32_t pp_size,
    const MpiCollectivesOptions& options = {});

}  // namespace inflight::model
