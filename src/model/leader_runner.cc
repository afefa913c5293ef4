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

Status LeaderRunner::Broken(const Status& delivery) {
  broken_ = Unavailable("the model's follower ranks are unreachable (" + delivery.message() +
                        "); restart the server (mpirun) to serve this model again");
  LOG_ERROR("leader: {}", broken_.message());
  return broken_;
}

Result<StepOutput> LeaderRunner::Step(const StepInput& input) {
  if (!broken_.ok()) return broken_;
  if (Status st = channel_->Send(EncodeStep(input, biases_)); !st.ok()) return Broken(st);
  return local_->Step(input);
}

Status LeaderRunner::Launch(const StepInput& input) {
  if (!broken_.ok()) return broken_;
  if (Status st = channel_->Post(EncodeStep(input, biases_)); !st.ok()) return Broken(st);
  return local_->Launch(input);
}

namespace {

// A step that failed on this rank: Ok to go on (it failed alike on every rank, before any
// collective), or the error that ends the follower (the group's collectives broke).
Status CheckFollowerStep(const Status& status, std::uint64_t step) {
  if (status.ok()) return Status::Ok();
  if (status.code() == StatusCode::kUnavailable) {
    // The group's collectives broke (a rank died or stopped): this rank cannot go on.
    return Status(status.code(),
                  "follower: step " + std::to_string(step) + " failed: " + status.message());
  }
  // A step the runner refuses (its checks run before any collective) fails alike on every rank,
  // the leader's included, whose executor fails that step's requests and goes on.
  LOG_WARN("follower: step {} failed as on every rank: {}", step, status.ToString());
  return Status::Ok();
}

}  // namespace

Status RunFollower(ModelRunner* runner, StepChannel& channel,
                   const std::function<Status(const Result<StepOutput>&)>& on_output) {
  EmbeddingBiasReceiver biases;
  // A rank of the first stage beside the leader (tp > 0) keeps steps in flight as the leader
  // does: it launches each step as it arrives and completes the oldest once the pipeline is full,
  // so that it never waits for the last stage's result of one micro-batch before computing the
  // next with the leader. Ranks whose output is wanted (on_output) complete every step at once.
  const std::size_t depth =
      runner != nullptr && !on_output
          ? static_cast<std::size_t>(std::max<std::int32_t>(1, runner->max_steps_in_flight()))
          : 1;
  std::size_t in_flight = 0;
  auto complete_oldest = [&](std::uint64_t step) -> Status {
    --in_flight;
    Result<StepOutput> out = runner->Complete();
    RETURN_IF_ERROR(CheckFollowerStep(out.status(), step));
    if (on_output) RETURN_IF_ERROR(on_output(out));
    return Status::Ok();
  };
  for (std::uint64_t steps = 0;; ++steps) {
    ASSIGN_OR_RETURN(std::string bytes, channel.Receive());
    ASSIGN_OR_RETURN(LeaderMessage message, DecodeLeaderMessage(bytes, biases));
    if (message.kind == LeaderMessageKind::kStop) {
      while (in_flight > 0) RETURN_IF_ERROR(complete_oldest(steps));
      LOG_INFO("follower: the leader stopped the model after {} steps", steps);
      return Status::Ok();
    }
    if (runner == nullptr) {
      return Internal("follower: the leader sent a step, but this rank's model did not load");
    }
    if (Status launched = runner->Launch(message.step); !launched.ok()) {
      RETURN_IF_ERROR(CheckFollowerStep(launched, steps));
      if (on_output) RETURN_IF_ERROR(on_output(Result<StepOutput>(launched)));
      continue;
    }
    ++in_flight;
    while (in_flight >= depth) RETURN_IF_ERROR(complete_oldest(steps));
  }
}

}  // namespace inflight::model
