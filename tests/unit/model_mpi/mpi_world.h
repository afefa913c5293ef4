// Small MPI_COMM_WORLD helpers shared by the tests that run under mpirun.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

namespace inflight::testing::mpi_world {

inline int WorldSize() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline int WorldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Rank 0's `s` on every rank (e.g. the engine directory rank 0 built; "" where it failed).
inline std::string ShareString(std::string s) {
  int n = static_cast<int>(s.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  s.resize(static_cast<std::size_t>(n));
  MPI_Bcast(s.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  return s;
}

// Whether every rank's `ok` is true: ranks give up together, before any collective of a step.
inline bool AllRanks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

}  // namespace inflight::testing::mpi_world
