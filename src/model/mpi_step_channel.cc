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
  if (!failed_ && WaitPosted(0).ok()) {
    MPI_Comm_free(&comm_);
    return;
  }
  // NOTE: a broadcast that timed out is still MPI's: freeing its communicator is erroneous, and its
  // buffers may still be read. Both are left to the end of the job (a broken group ends it).
  for (auto& outgoing : posted_) static_cast<void>(outgoing.release());
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

Status MpiStepChannel::WaitPosted(std::size_t keep) {
  while (posted_.size() > keep) {
    Outgoing& oldest = *posted_.front();
    Status st =
        WaitForMpiRequests(oldest.requests, oldest.count, send_timeout_,
                           "the broadcast of a step of " + std::to_string(oldest.size) +
                               " bytes to " + std::to_string(size_ - 1) + " follower rank(s)");
    if (!st.ok()) {
      failed_ = true;
      return st;
    }
    posted_.pop_front();
  }
  return Status::Ok();
}

Status MpiStepChannel::Post(std::string_view message) {
  if (failed_) return Unavailable("an earlier broadcast to the follower ranks failed");
  RETURN_IF_ERROR(WaitPosted(kMaxPosted - 1));
  // NOTE: the buffers must outlive the broadcast (MPI owns them until it completes, or for good
  // when it times out), so they live in posted_, not on the stack.
  auto outgoing = std::make_unique<Outgoing>();
  Outgoing& o = *outgoing;
  o.frame.assign(kFrameBytes, '\0');
  o.size = message.size();
  std::memcpy(o.frame.data(), &o.size, sizeof(o.size));
  const std::size_t head = std::min<std::size_t>(message.size(), kFrameBytes - sizeof(o.size));
  std::memcpy(o.frame.data() + sizeof(o.size), message.data(), head);
  o.rest.assign(message.substr(head));
  // Both broadcasts are posted before any wait, so that a follower that takes the frame late can
  // always take the rest too.
  RETURN_IF_ERROR(PostBroadcast(o.frame.data(), o.frame.size(), &o.requests[0], "a step"));
  o.count = o.rest.empty() ? 1 : 2;
  posted_.push_back(std::move(outgoing));
  if (o.count == 2) {
    RETURN_IF_ERROR(
        PostBroadcast(o.rest.data(), o.rest.size(), &o.requests[1], "the rest of a step"));
    // NOTE: the rest goes by rendezvous, which moves only inside this process's MPI calls. The
    // leader of a GPU group runs the step next and may then block without any (a copy to pageable
    // memory or a cudaFree waits for a device that is waiting in a collective for the followers,
    // who are waiting for this message): so the message is delivered before the step runs. This
    // costs only large (context) steps; the followers are at their Receive by then.
    return WaitPosted(0);
  }
  return Status::Ok();
}

Status MpiStepChannel::Send(std::string_view message) {
  RETURN_IF_ERROR(Post(message));
  return WaitPosted(0);
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
