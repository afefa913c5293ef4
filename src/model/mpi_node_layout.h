// Where the ranks of an MPI communicator run: how many hosts ("nodes", as NVIDIA's num_nodes
// parameter counts them) and each rank's place among the ranks of its own host. A GPU is chosen by
// the node-local rank, since device ids number a host's own GPUs; on one host the local rank is
// the rank.
#pragma once

#include <mpi.h>

#include <string>

#include "inflight/status.h"

namespace inflight::model {

struct NodeLayout {
  int num_nodes = 1;   // distinct hosts among the communicator's ranks
  int local_rank = 0;  // this rank's index among the ranks on its host, in communicator order
  int local_size = 1;  // ranks on this rank's host
};

// Collective over `comm`: every rank must call it. Hosts are told apart by
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), the ranks that can share memory.
Result<NodeLayout> NodeLayoutOf(MPI_Comm comm);

// Ok when `num_nodes` (the model's parameter) matches the layout; else an error naming both, for
// the model `what`.
Status CheckNumNodes(int num_nodes, const NodeLayout& layout, int world_size,
                     const std::string& what);

}  // namespace inflight::model
