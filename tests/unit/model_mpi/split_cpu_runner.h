// This rank's CPU runner of a split engine, as the tests under mpirun make it.
#pragma once

#include <memory>
#include <string>

#include "model/collectives.h"
#include "model/model_runner.h"
#include "model/mpi_collectives.h"

namespace inflight::model::testing {

struct SplitCpuRunner {
  std::shared_ptr<Collectives> group;  // MPI_COMM_WORLD's collectives at the engine's tp x pp
  std::unique_ptr<ModelRunner> runner;
};

// The runner (one thread, a KV pool of `max_kv_tokens`) of this rank's file of the engine in `dir`,
// over MpiCollectives of MPI_COMM_WORLD at tp x pp whose operations give up after
// `timeout_seconds`. Collective: every rank calls it.
inline Result<SplitCpuRunner> MakeSplitCpuRunner(const std::string& dir, std::int32_t tp,
                                                 std::int32_t pp, std::int64_t max_kv_tokens,
                                                 double timeout_seconds = 60) {
  MpiCollectivesOptions mo;
  mo.timeout_seconds = timeout_seconds;
  SplitCpuRunner split;
  ASSIGN_OR_RETURN(split.group, CreateMpiCollectives(MPI_COMM_WORLD, tp, pp, mo));
  RunnerOptions ro;
  ro.max_kv_tokens = max_kv_tokens;
  ro.num_threads = 1;
  ro.collectives = split.group;
  ASSIGN_OR_RETURN(split.runner, CreateCpuModelRunner(dir, ro));
  return split;
}

}  // namespace inflight::model::testing
