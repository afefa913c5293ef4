// The host side of a step's device sampling in the CUDA runner: the sampled rows' parameters and
// lists (device_sampling_batch.h), the requests' embedding biases on the device
// (embedding_bias_cache.h), and the pinned buffer the sampled ids and log-probs come back to.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "inflight/status.h"
#include "inflight/types.h"
#include "model/cuda_buffer.h"
#include "model/device_sampling_batch.h"
#include "model/embedding_bias_cache.h"
#include "model/model_runner.h"

namespace inflight::model {

class CudaSamplingStage {
 public:
  CudaSamplingStage(std::int64_t vocab_size, std::size_t max_batch_size)
      : bias_cache_(vocab_size, max_batch_size) {}

  // Starts a step; the previous step's work is done, so expired biases can go.
  void BeginStep() { bias_cache_.BeginStep(); }
  // Starts the step's rows.
  void Clear() { batch_.Clear(); }
  // Adds the sequence's DeviceSampling, its embedding bias uploaded on `stream` if new.
  Status Add(const DeviceSampling& d, cudaStream_t stream);
  void AddPadding() { batch_.AddPadding(); }
  const DeviceSamplingBatch& batch() const { return batch_; }

  // Sampled ids, then their log-probs, copied back each step.
  PinnedBuffer& host_ids() { return host_ids_; }
  std::int64_t bias_bytes() const { return bias_cache_.bytes(); }

  // SampleRows' error codes as StepOutput reports them.
  static TokenIdType SampledToken(std::int32_t id);

 private:
  DeviceSamplingBatch batch_;
  EmbeddingBiasCache bias_cache_;
  PinnedBuffer host_ids_;
};

}  // namespace inflight::model
