#include "model/mpi_node_layout.h"

namespace inflight::model {

Result<NodeLayout> NodeLayoutOf(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    return Internal("MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed");
  }
  NodeLayout layout;
  MPI_Comm_rank(node, &layout.local_rank);
  MPI_Comm_size(node, &layout.local_size);
  MPI_Comm_free(&node);
  // One count per host: its local rank 0 adds 1.
  const int mine = layout.local_rank == 0 ? 1 : 0;
  if (MPI_Allreduce(&mine, &layout.num_nodes, 1, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS) {
    return Internal("MPI_Allreduce of the node count failed");
  }
  return layout;
}

Status CheckNumNodes(int num_nodes, const NodeLayout& layout, int world_size,
                     const std::string& what) {
  if (num_nodes == layout.num_nodes) return Status::Ok();
  return InvalidArgument(what + ": num_nodes " + std::to_string(num_nodes) + ", but the " +
                         std::to_string(world_size) + " ranks of the MPI world run on " +
                         std::to_string(layout.num_nodes) +
                         (layout.num_nodes == 1 ? " host" : " hosts") + "; set num_nodes to " +
                         std::to_string(layout.num_nodes) +
                         " or leave it unset (mpirun's host list decides where ranks run)");
}

}  // namespace inflight::model
