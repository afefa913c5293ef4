// MPI's initialisation, once per process (common/mpi_launch.h says whether the process needs it).
//
// The server (inflight-server or a real tritonserver) does not initialise MPI; the backend does,
// when the launcher's environment says the process is one of several (mpirun -n N, N > 1). A host
// that initialised MPI itself keeps it: we neither initialise nor finalise it again.
#pragma once

#include "inflight/status.h"

namespace inflight::model {

// Initialises MPI (MPI_THREAD_MULTIPLE asked; at least MPI_THREAD_SERIALIZED needed: the executor's
// thread steps while other threads loaded the model) unless the host has; the first call does the
// work, later ones return its result. When we initialised it, MPI_Finalize runs at process exit.
Status EnsureMpiInitialized();

// Finalises MPI now if we initialised it and nobody finalised it yet (a follower before it exits).
void FinalizeMpiIfOurs();

}  // namespace inflight::model
