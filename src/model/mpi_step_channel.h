// The leader's StepChannel over MPI (leader_runner.h): a broadcast from rank 0 of a communicator
// to every other rank of it.
//
// A message goes out as one broadcast of a fixed frame ([size:u64][the first kFrameBytes - 8
// bytes]) and, when it is longer, a second broadcast of the rest, so that a decode step of a
// moderate batch costs one broadcast. Waits are non-blocking broadcasts polled with MPI_Test:
// the leader gives up after its time limit (a follower that stopped taking messages must not hang
// the server), and an idle follower sleeps between polls instead of spinning a core (Open MPI's
// blocking calls busy-wait) (mpi_wait.h).
#pragma once

#include <mpi.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>

#include "model/leader_runner.h"

namespace inflight::model {

class MpiStepChannel final : public StepChannel {
 public:
  // NOTE: under Open MPI's shared-memory transport (vader: eager limit 4096 bytes, its header
  // included), a frame of 4096 would go by rendezvous, which completes only while the leader
  // makes MPI calls; a frame below the limit is delivered at once, whatever the leader does next.
  static constexpr std::size_t kFrameBytes = 4096 - 128;
  // `comm`: the channel's own communicator (a duplicate, so that no other traffic matches its
  // broadcasts); the channel frees it. Rank 0 of it is the leader. `send_timeout`: the leader's
  // limit for one message.
  MpiStepChannel(MPI_Comm comm, std::chrono::milliseconds send_timeout);
  ~MpiStepChannel() override;
  MpiStepChannel(const MpiStepChannel&) = delete;
  MpiStepChannel& operator=(const MpiStepChannel&) = delete;

  // Send: Post, then wait for every posted message. Post: a message that fits the frame waits
  // only while kMaxPosted messages are outstanding (MPI allows several broadcasts in flight on one
  // communicator; the followers take them in order); a longer one returns once the followers have
  // it (its rest needs the leader's MPI calls to move, and the leader may make none for a while).
  Status Send(std::string_view message) override;
  Status Post(std::string_view message) override;
  Result<std::string> Receive() override;

  static constexpr std::size_t kMaxPosted = 8;

 private:
  // A message's broadcasts, whose buffers MPI reads until they complete.
  struct Outgoing {
    std::string frame;
    std::string rest;
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int count = 1;
    std::uint64_t size = 0;
  };
  // Starts a broadcast of `bytes` bytes at `data` from rank 0.
  Status PostBroadcast(void* data, std::size_t bytes, MPI_Request* request, const char* what);
  // Waits (send_timeout_ for each) until at most `keep` posted messages are outstanding.
  Status WaitPosted(std::size_t keep);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds send_timeout_;
  std::deque<std::unique_ptr<Outgoing>> posted_;  // oldest first
  bool failed_ = false;  // a broadcast timed out and is still pending: the channel is unusable
};

}  // namespace inflight::model
