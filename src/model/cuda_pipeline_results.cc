#include "model/cuda_pipeline_results.h"

#include <chrono>
#include <utility>

#include "model/cuda_group_wait.h"
#include "model/cuda_status.h"
#include "model/step_result_message.h"

namespace inflight::model {

Result<std::unique_ptr<CudaPipelineResults>> CudaPipelineResults::Create(std::int32_t capacity) {
  std::unique_ptr<CudaPipelineResults> r(new CudaPipelineResults(capacity));
  CUDA_RETURN(cudaStreamCreateWithFlags(&r->stream_, cudaStreamNonBlocking));
  for (Entry& e : r->entries_) {
    for (cudaEvent_t* ev : {&e.begin, &e.end, &e.received}) CUDA_RETURN(cudaEventCreate(ev));
  }
  return r;
}

// NOTE: no synchronisation: a step still in flight may wait for a last stage that is gone;
// destroying the stream and events releases them once the device is done with them.
CudaPipelineResults::~CudaPipelineResults() {
  for (Entry& e : entries_) {
    for (cudaEvent_t ev : {e.begin, e.end, e.received}) {
      if (ev != nullptr) cudaEventDestroy(ev);
    }
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status CudaPipelineResults::Begin(cudaStream_t stream) {
  ASSIGN_OR_RETURN(const std::int32_t slot, slots_.Begin());
  Status st = CudaStatus(cudaEventRecord(entries_[static_cast<std::size_t>(slot)].begin, stream),
                         "cudaEventRecord (step begin)");
  if (!st.ok()) slots_.Abandon();
  return st;
}

Status CudaPipelineResults::Post(StepOutput out, cudaStream_t stream, Collectives& group) {
  ASSIGN_OR_RETURN(const std::int32_t slot, slots_.begun());
  slots_.Posted();  // in flight from here on: Complete takes it, whatever fails below
  Entry& e = entries_[static_cast<std::size_t>(slot)];
  e.out = std::move(out);
  e.count = static_cast<std::int64_t>(StepResultCount(e.out));
  const auto bytes = e.count * static_cast<std::int64_t>(sizeof(float));
  // NOTE: a slot's buffers are reused only after Complete saw its copy land; growing one frees
  // memory (cudaFree waits for the device), which stalls this rank but cannot deadlock the group:
  // everything queued so far completes without more host calls.
  RETURN_IF_ERROR(e.message.Reserve(bytes));
  RETURN_IF_ERROR(e.host.Reserve(bytes));
  CUDA_RETURN(cudaEventRecord(e.end, stream));
  CUDA_RETURN(cudaStreamWaitEvent(stream_, e.end, 0));
  if (e.count > 0) {
    RETURN_IF_ERROR(group.ReceiveFromLastStage(e.message.get(), e.count, DType::kFloat32, stream_));
    CUDA_RETURN(cudaMemcpyAsync(e.host.get(), e.message.get(), static_cast<std::size_t>(bytes),
                                cudaMemcpyDeviceToHost, stream_));
  }
  CUDA_RETURN(cudaEventRecord(e.received, stream_));
  return Status::Ok();
}

Result<StepOutput> CudaPipelineResults::Complete(Collectives& group) {
  ASSIGN_OR_RETURN(const std::int32_t slot, slots_.Oldest());
  Entry& e = entries_[static_cast<std::size_t>(slot)];
  const auto start = std::chrono::steady_clock::now();
  const Status waited = WaitForGroupEvent(e.received, group);
  slots_.ReleaseOldest();
  RETURN_IF_ERROR(waited);
  StepOutput out = std::move(e.out);
  if (e.count > 0) UnpackStepResult(e.host.get<const float>(), out);
  out.device_wait_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  float device_ms = 0;
  CUDA_RETURN(cudaEventElapsedTime(&device_ms, e.begin, e.received));
  out.device_ms = device_ms;
  return out;
}

}  // namespace inflight::model
