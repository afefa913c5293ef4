// Waiting for a non-blocking MPI operation without spinning a core for long: Open MPI's blocking
// calls busy-wait, which starves the other ranks of a host with fewer cores than ranks (CI) and
// burns a core per idle follower. A wait spins (yielding the core) for a short while, so that
// back-to-back steps stay fast, then sleeps between polls, doubling up to a millisecond.
#pragma once

#include <mpi.h>

#include <chrono>
#include <optional>
#include <string>

#include "inflight/status.h"

namespace inflight::model {

// Waits until all `count` requests complete. `timeout` nullopt: for as long as it takes. Errors:
// MPI's (the text of its code), or kUnavailable when the time is up; the requests not complete
// are then still pending.
Status WaitForMpiRequests(MPI_Request* requests, int count,
                          std::optional<std::chrono::milliseconds> timeout,
                          const std::string& what);

// The text of an MPI error code.
std::string MpiErrorText(int code);

}  // namespace inflight::model
