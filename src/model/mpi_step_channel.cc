#include "model/mpi_step_channel.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "model/mpi_wait.h"

namespace inflight::model {

MpiStepChannel::MpiStepChannel(MPI_Comm comm, std::chrono::milliseconds send_timeout)
    : comm_(comm), send_timeout_(send_timeout) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  // Errors come back as codes (MPI's default would abort the job from inside a broadcast).
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

MpiStepChannel::~MpiStepChannel() {
  if (!failed_) {
    MPI_Comm_free(&comm_);
    return;
  }
  // NOTE: a broadcast that timed out is still MPI's: freeing its communicator is erroneous, and its
  // buffers may still be read. Both are left to the end of the job (a broken group ends it).
  new std::string(std::move(frame_));
  new std::string(std::move(rest_));
}

Status MpiStepChannel::PostBroadcast(void* data, std::size_t bytes, MPI_Request* request,
                                     const char* what) {
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument(std::string("a broadcast of ") + what + " of " + std::to_string(bytes) +
                           " bytes is more than MPI's int count allows");
  }
  const int rc = MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, 0, comm_, request);
  if (rc != MPI_SUCCESS) {
    failed_ = true;
    return Internal(std::string("MPI_Ibcast of ") + what + " failed: " + MpiErrorText(rc));
  }
  return Status::Ok();
}

Status MpiStepChannel::Send(std::string_view message) {
  if (failed_) return Unavailable("an earlier broadcast to the follower ranks failed");
  // NOTE: the buffers must outlive a broadcast that times out (MPI still owns them), so they are
  // members, not locals.
  frame_.assign(kFrameBytes, '\0');
  const std::uint64_t size = message.size();
  std::memcpy(frame_.data(), &size, sizeof(size));
  const std::size_t head = std::min<std::size_t>(message.size(), kFrameBytes - sizeof(size));
  std::memcpy(frame_.data() + sizeof(size), message.data(), head);
  rest_.assign(message.substr(head));
  // Both broadcasts are posted before waiting, so that a follower that takes the frame late can
  // always take the rest too.
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  RETURN_IF_ERROR(PostBroadcast(frame_.data(), frame_.size(), &requests[0], "a step"));
  const int count = rest_.empty() ? 1 : 2;
  if (count == 2) {
    RETURN_IF_ERROR(PostBroadcast(rest_.data(), rest_.size(), &requests[1], "the rest of a step"));
  }
  Status st =
      WaitForMpiRequests(requests, count, send_timeout_,
                         "the broadcast of a step of " + std::to_string(size) + " bytes to " +
                             std::to_string(size_ - 1) + " follower rank(s)");
  if (!st.ok()) failed_ = true;
  return st;
}

Result<std::string> MpiStepChannel::Receive() {
  if (failed_) return Unavailable("an earlier broadcast from the leader rank failed");
  std::vector<char> frame(kFrameBytes);
  MPI_Request request = MPI_REQUEST_NULL;
  RETURN_IF_ERROR(PostBroadcast(frame.data(), frame.size(), &request, "a step"));
  Status st = WaitForMpiRequests(&request, 1, std::nullopt, "receiving a step from the leader");
  if (!st.ok()) {
    failed_ = true;
    return st;
  }
  std::uint64_t size = 0;
  std::memcpy(&size, frame.data(), sizeof(size));
  const std::size_t head = std::min<std::size_t>(size, kFrameBytes - sizeof(size));
  std::string message(frame.data() + sizeof(size), head);
  if (head == size) return message;
  message.resize(size);
  RETURN_IF_ERROR(
      PostBroadcast(message.data() + head, size - head, &request, "the rest of a step"));
  st = WaitForMpiRequests(&request, 1, std::nullopt, "receiving the rest of a step");
  if (!st.ok()) {
    failed_ = true;
    return st;
  }
  return message;
}

}  // namespace inflight::model
