#include "model/cuda_group_wait.h"

#include <chrono>
#include <thread>
#include <vector>

#include "model/cuda_status.h"
#include "model/step_result_message.h"

namespace inflight::model {

namespace {

// Polls `query` (cudaStreamQuery or cudaEventQuery of what the step waits for) until it is done.
template <typename Query>
Status PollGroupWork(Query query, Collectives& group) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (std::int64_t polls = 0;; ++polls) {
    const cudaError_t rc = query();
    if (rc == cudaSuccess) return Status::Ok();
    if (rc != cudaErrorNotReady) CUDA_RETURN(rc);
    group.Progress();
    // NOTE: NCCL reports a dead peer only through its asynchronous error, so a plain
    // cudaStreamSynchronize would wait forever; checking every ~1 ms costs nothing measurable.
    if ((polls & 63) == 0) {
      RETURN_IF_ERROR(group.CheckWait(std::chrono::duration<double>(Clock::now() - start).count()));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(15));
  }
}

}  // namespace

Status WaitForGroupStream(cudaStream_t stream, const ModelShard& shard, Collectives& group) {
  if (shard.tp_size * shard.pp_size == 1) {
    CUDA_RETURN(cudaStreamSynchronize(stream));
    return Status::Ok();
  }
  return PollGroupWork([stream] { return cudaStreamQuery(stream); }, group);
}

Status WaitForGroupEvent(cudaEvent_t event, Collectives& group) {
  return PollGroupWork([event] { return cudaEventQuery(event); }, group);
}

Status ReturnStepToFirstStage(const ModelShard& shard, Collectives& group, cudaStream_t stream,
                              DeviceBuffer& staging, StepOutput& out) {
  if (shard.pp_size == 1) return Status::Ok();
  if (!shard.first_stage() && !shard.last_stage()) {
    out.logits.clear();
    out.sampled_tokens.clear();
    out.sampled_log_probs.clear();
    return Status::Ok();
  }
  // One fp32 message: the logits, then the sampled tokens' bits, then their log-probabilities.
  const std::size_t count = StepResultCount(out);
  if (count == 0) return Status::Ok();
  std::vector<float> packed(count);
  RETURN_IF_ERROR(staging.Reserve(static_cast<std::int64_t>(count * sizeof(float))));
  const auto n = static_cast<std::int64_t>(count);
  if (shard.last_stage()) {
    PackStepResult(out, packed.data());
    CUDA_RETURN(cudaMemcpyAsync(staging.get(), packed.data(), count * sizeof(float),
                                cudaMemcpyHostToDevice, stream));
    RETURN_IF_ERROR(group.SendToFirstStage(staging.get(), n, DType::kFloat32, stream));
    return WaitForGroupStream(stream, shard, group);
  }
  RETURN_IF_ERROR(group.ReceiveFromLastStage(staging.get(), n, DType::kFloat32, stream));
  CUDA_RETURN(cudaMemcpyAsync(packed.data(), staging.get(), count * sizeof(float),
                              cudaMemcpyDeviceToHost, stream));
  RETURN_IF_ERROR(WaitForGroupStream(stream, shard, group));
  UnpackStepResult(packed.data(), out);
  return Status::Ok();
}

}  // namespace inflight::model
