// The CUDA ModelRunner's steps (cuda_model_runner_impl.h): Step is Launch then Complete; a
// pipeline's first stage keeps steps in flight (cuda_pipeline_results.h), and so does one process
// with lookahead (cuda_local_steps.h, LaunchLocal); every other runner runs the whole step in
// Launch (RunStep: the forward pass or a decode graph, then the results).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "model/cuda_group_wait.h"
#include "model/cuda_model_runner_impl.h"
#include "model/cuda_status.h"

namespace inflight::model::cuda_runner {

Status CudaModelRunner::WaitForStep(StepOutput& out) {
  CUDA_RETURN(cudaEventRecord(step_end_, stream_));
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(WaitForGroupStream(stream_, shard_, *collectives_));
  out.device_wait_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  float device_ms = 0;
  CUDA_RETURN(cudaEventElapsedTime(&device_ms, step_begin_, step_end_));
  out.device_ms = device_ms;
  return Status::Ok();
}

Status CudaModelRunner::DecodeWithGraph(const StepInput& input, StepOutput& out) {
  ASSIGN_OR_RETURN(const std::int32_t bucket, graphs_->Enqueue(input));
  const auto n = static_cast<std::int32_t>(input.sequences.size());
  PinnedBuffer& host_ids = sampling_->host_ids();
  RETURN_IF_ERROR(host_ids.Reserve(std::int64_t{bucket + n} * 4));
  const auto* sampled = host_ids.get<const std::int32_t>();
  CUDA_RETURN(cudaMemcpyAsync(host_ids.get(), graphs_->sampled_ids().get(),
                              static_cast<std::size_t>(bucket + n) * 4, cudaMemcpyDeviceToHost,
                              stream_));
  RETURN_IF_ERROR(WaitForStep(out));
  out.row_begin.assign(static_cast<std::size_t>(n), 0);
  out.sampled_tokens.resize(static_cast<std::size_t>(n));
  out.sampled_log_probs.resize(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    out.sampled_tokens[static_cast<std::size_t>(i)] = CudaSamplingStage::SampledToken(sampled[i]);
    out.sampled_log_probs[static_cast<std::size_t>(i)] =
        std::bit_cast<float>(sampled[static_cast<std::size_t>(bucket + i)]);
  }
  return Status::Ok();
}

Result<StepOutput> CudaModelRunner::Step(const StepInput& input) {
  std::lock_guard<std::mutex> lock(step_mutex_);
  if (local_ != nullptr && local_->in_flight() > 0) {
    // Complete would return the oldest launched step, not this one.
    return Internal("CudaModelRunner::Step while " + std::to_string(local_->in_flight()) +
                    " launched steps are in flight; complete them first");
  }
  RETURN_IF_ERROR(Launch(input));
  return Complete();
}

Status CudaModelRunner::Launch(const StepInput& input) {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  RETURN_IF_ERROR(ValidateStep(input));
  if (local_ != nullptr) return LaunchLocal(input);
  if (pipeline_ == nullptr) {
    finished_.push_back(RunStep(input));
    return Status::Ok();
  }
  CUDA_RETURN(cudaSetDevice(device_));
  StepOutput out;
  out.vocab_size = config_.vocab_size;
  RETURN_IF_ERROR(pipeline_->Begin(stream_));
  // NOTE: earlier steps may still run; freeing an expired bias (cudaFree) waits for the device.
  sampling_->BeginStep();
  Status queued;
  if (input.sequences.empty()) {
    // Nothing to compute; the last stage sends nothing either (an empty result).
  } else if (graphs_->Eligible(input)) {
    // The graph's sampled ids are the last stage's; this stage's come in the result message.
    const Result<std::int32_t> bucket = graphs_->Enqueue(input);
    queued = bucket.status();
    const auto n = input.sequences.size();
    out.row_begin.assign(n, 0);
    out.sampled_tokens.assign(n, -1);
    out.sampled_log_probs.assign(n, std::numeric_limits<float>::quiet_NaN());
  } else {
    queued = Forward(input, out, /*wait=*/false);
  }
  if (!queued.ok()) {
    // NOTE: part of the step may be queued; the group cannot go on after a failed step anyway.
    pipeline_->Abandon();
    return queued;
  }
  return pipeline_->Post(std::move(out), stream_, *collectives_);
}

Status CudaModelRunner::LaunchLocal(const StepInput& input) {
  // Every check before anything is queued: a refused step is not in flight, and the step launched
  // before stays the one a later previous_step_row refers to.
  ASSIGN_OR_RETURN(SampledWords tokens_from,
                   ResolvePreviousStepRows(
                       input, launched_samples_.has_value() ? &*launched_samples_ : nullptr));
  CUDA_RETURN(cudaSetDevice(device_));
  StepOutput out;
  out.vocab_size = config_.vocab_size;
  RETURN_IF_ERROR(local_->Begin(stream_));
  // NOTE: the step before may still run; freeing an expired bias (cudaFree) waits for the device.
  sampling_->BeginStep();
  const auto n = static_cast<std::int32_t>(input.sequences.size());
  const SampledWords* patches = tokens_from.any() ? &tokens_from : nullptr;
  QueuedSamples samples;
  Status queued;
  if (n == 0) {
    // Nothing to compute: the step completes in its turn with an empty result.
  } else if (graphs_->Eligible(input)) {
    const Result<std::int32_t> bucket = graphs_->Enqueue(input, patches);
    queued = bucket.status();
    if (bucket.ok()) {
      // The graph's ids, then its log-probs at the bucket's offset (DecodeWithGraph's layout).
      samples.words = graphs_->sampled_ids().get();
      samples.log_prob_offset = *bucket;
      samples.sequences.resize(static_cast<std::size_t>(n));
      std::iota(samples.sequences.begin(), samples.sequences.end(), 0);
      out.row_begin.assign(static_cast<std::size_t>(n), 0);
    }
  } else {
    queued = Forward(input, out, /*wait=*/false, &samples, patches);
  }
  if (!queued.ok()) {
    // NOTE: part of the step may be queued; its requests fail, and later steps run after it. Its
    // samples are unknown, so no later step may take tokens from it.
    local_->Abandon();
    launched_samples_.reset();
    return queued;
  }
  // Where this step's samples will be, for the next step's previous_step_row.
  SampledWords launched;
  launched.words = static_cast<const std::int32_t*>(samples.words);
  launched.word_of_sequence.assign(static_cast<std::size_t>(n), -1);
  for (std::size_t j = 0; j < samples.sequences.size(); ++j) {
    launched.word_of_sequence[static_cast<std::size_t>(samples.sequences[j])] =
        static_cast<std::int32_t>(j);
  }
  Status posted = local_->Post(std::move(out), n, std::move(samples), stream_);
  if (posted.ok()) {
    launched_samples_ = std::move(launched);
  } else {
    launched_samples_.reset();
  }
  return posted;
}

Result<StepOutput> CudaModelRunner::Complete() {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  if (local_ != nullptr) return local_->Complete();
  if (pipeline_ != nullptr) return pipeline_->Complete(*collectives_);
  if (finished_.empty()) return Internal("CudaModelRunner::Complete without a launched step");
  Result<StepOutput> out = std::move(finished_.front());
  finished_.pop_front();
  return out;
}

Result<StepOutput> CudaModelRunner::RunStep(const StepInput& input) {
  CUDA_RETURN(cudaSetDevice(device_));
  StepOutput out;
  out.vocab_size = config_.vocab_size;
  if (input.sequences.empty()) return out;
  sampling_->BeginStep();  // the previous step's work is done: expired biases can go
  CUDA_RETURN(cudaEventRecord(step_begin_, stream_));
  if (graphs_->Eligible(input)) {
    RETURN_IF_ERROR(DecodeWithGraph(input, out));
  } else {
    RETURN_IF_ERROR(Forward(input, out));
  }
  RETURN_IF_ERROR(ReturnStepToFirstStage(shard_, *collectives_, stream_, stage_results_, out));
  if (observe_amax_ != nullptr) RETURN_IF_ERROR(ObserveStep());
  return out;
}

Status CudaModelRunner::ObserveStep() {
  std::vector<unsigned> bits(static_cast<std::size_t>(amax_bits_.bytes()) / sizeof(unsigned));
  CUDA_RETURN(cudaMemcpyAsync(bits.data(), amax_bits_.get(), bits.size() * sizeof(unsigned),
                              cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN(cudaStreamSynchronize(stream_));
  for (std::size_t l = 0; l < observe_amax_->layers.size(); ++l) {
    for (int p = 0; p < kNumAmaxPoints; ++p) {
      // The device holds the running max over every step since load; NaN stays NaN.
      float& host = observe_amax_->layers[l][static_cast<std::size_t>(p)];
      const float device =
          std::bit_cast<float>(bits[l * kNumAmaxPoints + static_cast<std::size_t>(p)]);
      host = std::isnan(host) || std::isnan(device) ? std::nanf("") : std::max(host, device);
    }
  }
  return Status::Ok();
}

}  // namespace inflight::model::cuda_runner
