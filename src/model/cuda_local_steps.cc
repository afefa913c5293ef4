#include "model/cuda_local_steps.h"

#include <bit>
#include <chrono>
#include <limits>
#include <utility>

#include "model/cuda_sampling_stage.h"
#include "model/cuda_status.h"

namespace inflight::model {

Result<std::unique_ptr<CudaLocalSteps>> CudaLocalSteps::Create(std::int32_t capacity) {
  std::unique_ptr<CudaLocalSteps> r(new CudaLocalSteps(capacity));
  for (Entry& e : r->entries_) {
    for (cudaEvent_t* ev : {&e.begin, &e.end}) CUDA_RETURN(cudaEventCreate(ev));
  }
  return r;
}

// NOTE: no synchronisation: destroying an event the device has yet to pass releases it then.
CudaLocalSteps::~CudaLocalSteps() {
  for (Entry& e : entries_) {
    for (cudaEvent_t ev : {e.begin, e.end}) {
      if (ev != nullptr) cudaEventDestroy(ev);
    }
  }
}

Status CudaLocalSteps::Begin(cudaStream_t stream) {
  ASSIGN_OR_RETURN(const std::int32_t slot, slots_.Begin());
  Status st = CudaStatus(cudaEventRecord(entries_[static_cast<std::size_t>(slot)].begin, stream),
                         "cudaEventRecord (step begin)");
  if (!st.ok()) slots_.Abandon();
  return st;
}

Status CudaLocalSteps::Post(StepOutput out, std::int64_t num_sequences, QueuedSamples samples,
                            cudaStream_t stream) {
  ASSIGN_OR_RETURN(const std::int32_t slot, slots_.begun());
  Entry& e = entries_[static_cast<std::size_t>(slot)];
  e.out = std::move(out);
  e.num_sequences = num_sequences;
  e.samples = std::move(samples);
  Status queued = QueueEnd(e, stream);
  // A failed Post gives the slot back: Launch failed, so the step is not in flight (model_runner.h)
  // and Complete must not take it.
  if (queued.ok()) {
    slots_.Posted();
  } else {
    slots_.Abandon();
  }
  return queued;
}

Status CudaLocalSteps::QueueEnd(Entry& e, cudaStream_t stream) {
  const auto rows = static_cast<std::int64_t>(e.samples.sequences.size());
  if (rows > 0) {
    const std::int64_t bytes = (e.samples.log_prob_offset + rows) * 4;
    // NOTE: a slot's buffer is reused only after Complete saw its copy land; growing it frees
    // pinned memory, which waits for the device (rare: the largest step so far sets the size).
    RETURN_IF_ERROR(e.host.Reserve(bytes));
    CUDA_RETURN(cudaMemcpyAsync(e.host.get(), e.samples.words, static_cast<std::size_t>(bytes),
                                cudaMemcpyDeviceToHost, stream));
  }
  CUDA_RETURN(cudaEventRecord(e.end, stream));
  return Status::Ok();
}

Result<StepOutput> CudaLocalSteps::Complete() {
  ASSIGN_OR_RETURN(const std::int32_t slot, slots_.Oldest());
  Entry& e = entries_[static_cast<std::size_t>(slot)];
  const auto start = std::chrono::steady_clock::now();
  const Status waited = CudaStatus(cudaEventSynchronize(e.end), "cudaEventSynchronize (step end)");
  slots_.ReleaseOldest();
  RETURN_IF_ERROR(waited);
  StepOutput out = std::move(e.out);
  if (!e.samples.sequences.empty()) {
    const auto n = static_cast<std::size_t>(e.num_sequences);
    out.sampled_tokens.assign(n, -1);
    out.sampled_log_probs.assign(n, std::numeric_limits<float>::quiet_NaN());
    const auto* words = e.host.get<const std::int32_t>();
    const auto offset = static_cast<std::size_t>(e.samples.log_prob_offset);
    for (std::size_t j = 0; j < e.samples.sequences.size(); ++j) {
      const auto i = static_cast<std::size_t>(e.samples.sequences[j]);
      out.sampled_tokens[i] = CudaSamplingStage::SampledToken(words[j]);
      out.sampled_log_probs[i] = std::bit_cast<float>(words[offset + j]);
    }
  }
  out.device_wait_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  float device_ms = 0;
  CUDA_RETURN(cudaEventElapsedTime(&device_ms, e.begin, e.end));
  out.device_ms = device_ms;
  return out;
}

}  // namespace inflight::model
