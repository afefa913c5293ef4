// After every rank of a leader-mode group tried to load its shard, rank 0 learns how each went
// before it serves: a rank that failed makes the model fail to load on rank 0 with that rank's
// error, and the KV pool the executor schedules over is the smallest of the group's (the CUDA
// runner sizes its pool from each device's free memory; the block tables are the same on every
// rank, so no rank may be handed a block it does not have).
#pragma once

#include <mpi.h>

#include <cstdint>

#include "inflight/status.h"

namespace inflight::model {

// Collective over `comm`: every rank calls it with its own load result (the runner's KV block
// count, or its error). Rank 0 gets the group's smallest KV block count, or an error that names
// the first rank that failed and its message; every other rank gets its own count back.
Result<std::int64_t> GatherLoadResults(MPI_Comm comm, const Result<std::int64_t>& local);

}  // namespace inflight::model
