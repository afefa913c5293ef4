#include "model/leader_runner.h"

#include <algorithm>

#include "common/logging.h"

namespace inflight::model {

LeaderRunner::LeaderRunner(std::unique_ptr<ModelRunner> local, std::unique_ptr<StepChannel> channel,
                           std::int64_t group_kv_blocks)
    : local_(std::move(local)),
      channel_(std::move(channel)),
      group_kv_blocks_(std::min(group_kv_blocks, local_->num_kv_blocks())) {}

LeaderRunner::~LeaderRunner() {
  if (!broken_.ok()) return;  // the followers cannot be reached; the job ends with the leader
  if (Status st = channel_->Send(EncodeStop()); !st.ok()) {
    LOG_ERROR("leader: could not tell the follower ranks to stop: {}", st.ToString());
  }
}

Result<StepOutput> LeaderRunner::Step(const StepInput& input) {
  if (!broken_.ok()) return broken_;
  if (Status st = channel_->Send(EncodeStep(input, biases_)); !st.ok()) {
    broken_ = Unavailable("the model's follower ranks are unreachable (" + st.message() +
                          "); restart the server (mpirun) to serve this model again");
    LOG_ERROR("leader: {}", broken_.message());
    return broken_;
  }
  return local_->Step(input);
}

Status RunFollower(ModelRunner* runner, StepChannel& channel,
                   const std::function<Status(const Result<StepOutput>&)>& on_output) {
  EmbeddingBiasReceiver biases;
  for (std::uint64_t steps = 0;; ++steps) {
    ASSIGN_OR_RETURN(std::string bytes, channel.Receive());
    ASSIGN_OR_RETURN(LeaderMessage message, DecodeLeaderMessage(bytes, biases));
    if (message.kind == LeaderMessageKind::kStop) {
      LOG_INFO("follower: the leader stopped the model after {} steps", steps);
      return Status::Ok();
    }
    if (runner == nullptr) {
      return Internal("follower: the leader sent a step, but this rank's model did not load");
    }
    Result<StepOutput> out = runner->Step(message.step);
    if (!out.ok() && out.status().code() == StatusCode::kUnavailable) {
      // The group's collectives broke (a rank died or stopped): this rank cannot go on.
      return Status(out.status().code(), "follower: step " + std::to_string(steps) +
                                             " failed: " + out.status().message());
    }
    if (!out.ok()) {
      // A step the runner refuses (its checks run before any collective) fails alike on every
      // rank, the leader's included, whose executor fails that step's requests and goes on.
      LOG_WARN("follower: step {} failed as on every rank: {}", steps, out.status().ToString());
    }
    if (on_output) RETURN_IF_ERROR(on_output(out));
  }
}

}  // namespace inflight::model
