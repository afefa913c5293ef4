// Definitions of the opaque TRITONSERVER_* objects that the core hands to backends, and the casts
// between TRITONBACKEND_* handles and the core's own classes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/triton_status.h"
#include "triton/core/tritonbackend.h"
#include "triton/core/tritonserver.h"

struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_UNKNOWN;
  std::string message;
};

struct TRITONSERVER_Message {
  std::string json;
};

struct TRITONSERVER_Parameter {
  std::string name;
  TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
  std::string string_value;  // STRING, and BYTES' storage
  int64_t int_value = 0;
  bool bool_value = false;
  double double_value = 0.0;
};

struct TRITONSERVER_BufferAttributes {
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  size_t byte_size = 0;
  void* cuda_ipc_handle = nullptr;
};

namespace inflight::server {

class Backend;
class Model;
class ModelInstance;
class InferenceRequest;
struct RequestInput;
class BackendResponse;
struct ResponseOutput;
class ResponseFactory;

using ::inflight::FromTritonCode;
using ::inflight::ToTritonCode;
// nullptr for an ok status; the caller (usually a backend) owns the returned error.
TRITONSERVER_Error* ToTritonError(const Status& status);
// Reads `error` without taking it; ok for nullptr.
Status FromTritonError(const TRITONSERVER_Error* error);
// Reads and deletes `error`.
Status TakeTritonError(TRITONSERVER_Error* error);

// Handle casts: the TRITONBACKEND_* types are never defined; each handle is a pointer to our class.
template <typename Core, typename Handle>
Core* FromHandle(Handle* handle) {
  return reinterpret_cast<Core*>(handle);
}
template <typename Handle, typename Core>
Handle* ToHandle(Core* core) {
  return reinterpret_cast<Handle*>(core);
}

}  // namespace inflight::server

// For the C API bodies: argument checks that return an INVALID_ARG error naming the argument.
#define INFLIGHT_API_REQUIRE(ptr)                                             \
  do {                                                                        \
    if ((ptr) == nullptr)                                                     \
      return TRITONSERVER_ErrorNew(                                           \
          TRITONSERVER_ERROR_INVALID_ARG,                                     \
          (std::string(__func__) + ": argument '" #ptr "' is null").c_str()); \
  } while (0)
