#include "model/mpi_load_report.h"

#include <algorithm>
#include <string>
#include <vector>

#include "model/mpi_wait.h"

namespace inflight::model {
namespace {

// One rank's result: its KV block count (-1: it failed) and the length of its error text.
struct LoadRecord {
  std::int64_t kv_blocks = -1;
  std::int64_t message_bytes = 0;
};

}  // namespace

Result<std::int64_t> GatherLoadResults(MPI_Comm comm, const Result<std::int64_t>& local) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::string message = local.ok() ? std::string() : local.status().ToString();
  LoadRecord mine{local.ok() ? *local : -1, static_cast<std::int64_t>(message.size())};
  std::vector<LoadRecord> records(rank == 0 ? static_cast<std::size_t>(size) : 0);
  // NOTE: no time limit: a rank may take minutes to read a large shard. A rank that dies instead
  // ends the whole job (mpirun's default), so nobody waits here for a dead rank.
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Igather(&mine, sizeof(LoadRecord), MPI_BYTE, records.data(), sizeof(LoadRecord),
                       MPI_BYTE, 0, comm, &request);
  if (rc != MPI_SUCCESS) return Internal("MPI_Igather of the load results: " + MpiErrorText(rc));
  RETURN_IF_ERROR(
      WaitForMpiRequests(&request, 1, std::nullopt, "gathering the ranks' load results"));

  std::vector<int> counts(records.size());
  std::vector<int> offsets(records.size());
  int total = 0;
  for (std::size_t r = 0; r < records.size(); ++r) {
    counts[r] = static_cast<int>(records[r].message_bytes);
    offsets[r] = total;
    total += counts[r];
  }
  std::string texts(static_cast<std::size_t>(total), '\0');
  rc = MPI_Igatherv(message.data(), static_cast<int>(message.size()), MPI_BYTE, texts.data(),
                    counts.data(), offsets.data(), MPI_BYTE, 0, comm, &request);
  if (rc != MPI_SUCCESS) return Internal("MPI_Igatherv of the load errors: " + MpiErrorText(rc));
  RETURN_IF_ERROR(
      WaitForMpiRequests(&request, 1, std::nullopt, "gathering the ranks' load errors"));
  if (rank != 0 || !local.ok()) return local;

  std::int64_t smallest = -1;
  for (std::size_t r = 0; r < records.size(); ++r) {
    if (records[r].kv_blocks < 0) {
      return Internal(
          "rank " + std::to_string(r) + " of " + std::to_string(size) +
          " could not load its part of the engine: " +
          texts.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(counts[r])));
    }
    smallest = smallest < 0 ? records[r].kv_blocks : std::min(smallest, records[r].kv_blocks);
  }
  return smallest;
}

}  // namespace inflight::model
