// TRITONBACKEND_MemoryManager*: host memory always; device memory only in a CUDA build.
#include <cstdlib>
#include <string>

#include "server/c_api_objects.h"

#ifdef INFLIGHT_SERVER_CUDA
#include <cuda_runtime_api.h>
#endif

namespace inflight::server {

// One manager for the process: TRITONBACKEND_BackendMemoryManager hands out its address.
struct MemoryManager {};

TRITONBACKEND_MemoryManager* GlobalMemoryManager() {
  static MemoryManager manager;
  return ToHandle<TRITONBACKEND_MemoryManager>(&manager);
}

}  // namespace inflight::server

namespace {

TRITONSERVER_Error* Err(TRITONSERVER_Error_Code code, const std::string& msg) {
  return TRITONSERVER_ErrorNew(code, msg.c_str());
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_MemoryManagerAllocate(TRITONBACKEND_MemoryManager* manager,
                                                        void** buffer,
                                                        const TRITONSERVER_MemoryType memory_type,
                                                        const int64_t memory_type_id,
                                                        const uint64_t byte_size) {
  INFLIGHT_API_REQUIRE(manager);
  INFLIGHT_API_REQUIRE(buffer);
  switch (memory_type) {
    case TRITONSERVER_MEMORY_CPU:
    case TRITONSERVER_MEMORY_CPU_PINNED: {
      // NOTE: pinned requests get pageable memory; correct, only slower to copy to a device.
      *buffer = std::malloc(byte_size == 0 ? 1 : byte_size);
      if (*buffer == nullptr) {
        return Err(TRITONSERVER_ERROR_UNAVAILABLE,
                   "unable to allocate " + std::to_string(byte_size) + " bytes of host memory");
      }
      return nullptr;
    }
    case TRITONSERVER_MEMORY_GPU: {
#ifdef INFLIGHT_SERVER_CUDA
      int previous = 0;
      cudaGetDevice(&previous);
      cudaError_t err = cudaSetDevice(static_cast<int>(memory_type_id));
      if (err == cudaSuccess) err = cudaMalloc(buffer, byte_size);
      cudaSetDevice(previous);
      if (err != cudaSuccess) {
        return Err(TRITONSERVER_ERROR_UNAVAILABLE,
                   "unable to allocate " + std::to_string(byte_size) + " bytes on GPU " +
                       std::to_string(memory_type_id) + ": " + cudaGetErrorString(err));
      }
      return nullptr;
#else
      return Err(TRITONSERVER_ERROR_UNSUPPORTED,
                 "GPU memory requested (device " + std::to_string(memory_type_id) +
                     ") but inflight-server was built without CUDA");
#endif
    }
  }
  return Err(TRITONSERVER_ERROR_INVALID_ARG,
             "unknown memory type " + std::to_string(static_cast<int>(memory_type)));
}

TRITONSERVER_Error* TRITONBACKEND_MemoryManagerFree(TRITONBACKEND_MemoryManager* manager,
                                                    void* buffer,
                                                    const TRITONSERVER_MemoryType memory_type,
                                                    const int64_t memory_type_id) {
  INFLIGHT_API_REQUIRE(manager);
  (void)memory_type_id;
  switch (memory_type) {
    case TRITONSERVER_MEMORY_CPU:
    case TRITONSERVER_MEMORY_CPU_PINNED:
      std::free(buffer);
      return nullptr;
    case TRITONSERVER_MEMORY_GPU:
#ifdef INFLIGHT_SERVER_CUDA
      if (cudaFree(buffer) != cudaSuccess) {
        return Err(TRITONSERVER_ERROR_INTERNAL, "cudaFree failed");
      }
      return nullptr;
#else
      return Err(TRITONSERVER_ERROR_UNSUPPORTED,
                 "GPU memory free requested but inflight-server was built without CUDA");
#endif
  }
  return Err(TRITONSERVER_ERROR_INVALID_ARG,
             "unknown memory type " + std::to_string(static_cast<int>(memory_type)));
}

}  // extern "C"
