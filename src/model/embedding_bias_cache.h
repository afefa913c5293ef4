// Device copies of the per-request embedding biases of device sampling ([vocab] fp32 each), so a
// request's bias crosses the bus once, not once per step. Keyed by the shared handle the executor
// passes with every step (DeviceSampling::embedding_bias): a copy lives while its handle's owners
// do and is freed at the first step after they let go. At most `capacity` copies (the batch size
// is enough for one step); past that the least recently used one is reused, to be uploaded again
// if its request comes back.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "inflight/status.h"

namespace inflight::model {

class EmbeddingBiasCache {
 public:
  EmbeddingBiasCache(std::int64_t vocab, std::size_t capacity)
      : vocab_(vocab), capacity_(capacity) {}
  ~EmbeddingBiasCache();
  EmbeddingBiasCache(const EmbeddingBiasCache&) = delete;
  EmbeddingBiasCache& operator=(const EmbeddingBiasCache&) = delete;

  // Starts a step: frees the copies whose handles expired. Call with no work in flight that reads
  // them.
  void BeginStep();
  // The device copy of `bias` ([vocab] values), uploaded on `stream` when it has none. Valid until
  // the next BeginStep; copies used in the current step are never reused for another bias.
  // Errors: a bias of the wrong size (kInvalidArgument), no device memory (kInternal).
  Result<const float*> Get(const std::shared_ptr<const std::vector<float>>& bias,
                           cudaStream_t stream);
  std::int64_t bytes() const {
    return static_cast<std::int64_t>(entries_.size()) * vocab_ *
           static_cast<std::int64_t>(sizeof(float));
  }

 private:
  struct Entry {
    std::weak_ptr<const std::vector<float>> owner;
    float* device = nullptr;
    std::uint64_t last_used_step = 0;
  };

  std::int64_t vocab_;
  std::size_t capacity_;
  std::uint64_t step_ = 1;
  std::vector<Entry> entries_;
};

}  // namespace inflight::model
