#include "model/embedding_bias_cache.h"

#include <string>

namespace inflight::model {
namespace {

// Whether `w` and `p` share ownership of the same object (so an address reused by a new vector
// never matches an old entry).
bool SameOwner(const std::weak_ptr<const std::vector<float>>& w,
               const std::shared_ptr<const std::vector<float>>& p) {
  return !w.owner_before(p) && !p.owner_before(w);
}

}  // namespace

EmbeddingBiasCache::~EmbeddingBiasCache() {
  for (Entry& e : entries_) cudaFree(e.device);
}

void EmbeddingBiasCache::BeginStep() {
  ++step_;
  for (std::size_t i = 0; i < entries_.size();) {
    if (entries_[i].owner.expired()) {
      cudaFree(entries_[i].device);
      entries_[i] = entries_.back();
      entries_.pop_back();
    } else {
      ++i;
    }
  }
}

Result<const float*> EmbeddingBiasCache::Get(const std::shared_ptr<const std::vector<float>>& bias,
                                             cudaStream_t stream) {
  if (static_cast<std::int64_t>(bias->size()) != vocab_) {
    return InvalidArgument("embedding_bias has " + std::to_string(bias->size()) +
                           " values: expected vocab_size " + std::to_string(vocab_));
  }
  Entry* slot = nullptr;
  for (Entry& e : entries_) {
    if (SameOwner(e.owner, bias)) {
      e.last_used_step = step_;
      return static_cast<const float*>(e.device);
    }
    // A reuse candidate: not needed by this step, least recently used.
    if (e.last_used_step < step_ && (slot == nullptr || e.last_used_step < slot->last_used_step)) {
      slot = &e;
    }
  }
  if (entries_.size() < capacity_ || slot == nullptr) {
    void* ptr = nullptr;
    const std::size_t bytes = static_cast<std::size_t>(vocab_) * sizeof(float);
    if (const cudaError_t err = cudaMalloc(&ptr, bytes); err != cudaSuccess) {
      return Internal("embedding bias device copy: cudaMalloc(" + std::to_string(bytes) +
                      "): " + cudaGetErrorString(err));
    }
    entries_.push_back(Entry{{}, static_cast<float*>(ptr), 0});
    slot = &entries_.back();
  }
  slot->owner = bias;
  slot->last_used_step = step_;
  const cudaError_t err = cudaMemcpyAsync(slot->device, bias->data(), bias->size() * sizeof(float),
                                          cudaMemcpyHostToDevice, stream);
  if (err != cudaSuccess) {
    slot->owner.reset();  // its contents are unknown now
    return Internal(std::string("embedding bias upload: ") + cudaGetErrorString(err));
  }
  return static_cast<const float*>(slot->device);
}

}  // namespace inflight::model
