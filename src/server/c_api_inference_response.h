// The response half of Triton's BLS C API (c_api_inference.cc has the requests): the response
// allocator and response objects a backend gets from TRITONSERVER_ServerInferAsync, and how the
// core's responses become them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/c_api_objects.h"
#include "server/server_api.h"

struct TRITONSERVER_ResponseAllocator {
  TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn = nullptr;
  TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn = nullptr;
  TRITONSERVER_ResponseAllocatorStartFn_t start_fn = nullptr;
};

struct TRITONSERVER_InferenceResponse {
  inflight::server::InferResponse response;
  TRITONSERVER_Error error{};  // meaningful when response.error is set
  struct Buffer {
    void* base = nullptr;
    void* userp = nullptr;
    size_t byte_size = 0;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
  };
  std::vector<Buffer> buffers;  // one per output
  TRITONSERVER_ResponseAllocator* allocator = nullptr;
  // What TRITONSERVER_InferenceResponseParameter hands out.
  std::vector<std::pair<std::string, inflight::server::ParameterValue>> parameters;
  std::vector<std::string> parameter_strings;
  std::vector<int64_t> parameter_ints;
  std::vector<double> parameter_doubles;
  std::unique_ptr<bool[]> parameter_bools;

  ~TRITONSERVER_InferenceResponse() {
    for (size_t i = 0; i < buffers.size(); ++i) {
      const Buffer& b = buffers[i];
      if (allocator != nullptr && allocator->release_fn != nullptr && b.base != nullptr) {
        TRITONSERVER_Error* err = allocator->release_fn(allocator, b.base, b.userp, b.byte_size,
                                                        b.memory_type, b.memory_type_id);
        if (err != nullptr) TRITONSERVER_ErrorDelete(err);
      }
    }
  }
};

namespace inflight::server {

// Moves the core's response into a TRITONSERVER_InferenceResponse, its outputs into buffers from
// the request's allocator (start_fn once, then alloc_fn per output). An allocation failure turns
// the response into that error.
std::unique_ptr<TRITONSERVER_InferenceResponse> MakeInferenceResponse(
    InferResponse core, TRITONSERVER_ResponseAllocator* alloc, void* alloc_userp);

}  // namespace inflight::server
