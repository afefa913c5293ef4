// One CUDA allocation, freed on destruction: device memory, or pinned host memory, which a
// device-to-host copy fills without blocking the host (a pageable destination makes
// cudaMemcpyAsync wait for the stream, hiding where a step's time goes).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "inflight/status.h"
#include "model/cuda_status.h"

namespace inflight::model {

enum class Memory { kDevice, kPinnedHost };
template <Memory kKind>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  ~CudaBuffer() { Reset(); }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  Status Allocate(std::int64_t bytes) {
    Reset();
    if (bytes <= 0) return Status::Ok();
    if constexpr (kKind == Memory::kDevice) {
      CUDA_RETURN(cudaMalloc(&ptr_, static_cast<std::size_t>(bytes)));
    } else {
      CUDA_RETURN(cudaMallocHost(&ptr_, static_cast<std::size_t>(bytes)));
    }
    bytes_ = bytes;
    return Status::Ok();
  }
  // Allocate, unless `bytes` already fit.
  Status Reserve(std::int64_t bytes) { return bytes <= bytes_ ? Status::Ok() : Allocate(bytes); }
  void Reset() {
    if (ptr_ != nullptr) {
      if constexpr (kKind == Memory::kDevice) {
        cudaFree(ptr_);
      } else {
        cudaFreeHost(ptr_);
      }
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  std::int64_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::int64_t bytes_ = 0;
};
using DeviceBuffer = CudaBuffer<Memory::kDevice>;
using PinnedBuffer = CudaBuffer<Memory::kPinnedHost>;

}  // namespace inflight::model
