// This process's place in an MPI job, as the launcher (mpirun) describes it in the environment,
// read without MPI: whether the process needs MPI at all is decided from it (model/mpi_process.h).
#pragma once

#include <string>

#include "inflight/status.h"

namespace inflight {

struct MpiLaunch {
  int rank = 0;        // in the job (MPI_COMM_WORLD)
  int size = 1;        // processes in the job; 1 without a launcher
  int local_rank = 0;  // among the job's processes on this host
  std::string source;  // the variables it was read from, for messages ("OMPI_COMM_WORLD_SIZE")
};

// What the launcher put in the environment: Open MPI's OMPI_COMM_WORLD_SIZE / _RANK / _LOCAL_RANK,
// else MPICH's (Hydra) PMI_SIZE / PMI_RANK / MPI_LOCALRANKID; size 1 when neither is set.
// Errors: a variable that is not a number, a rank outside [0, size).
Result<MpiLaunch> MpiLaunchFromEnvironment();

}  // namespace inflight
