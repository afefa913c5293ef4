// TRITONBACKEND_Request* and TRITONBACKEND_Input*: what a backend reads from a request.
#include <cstring>
#include <string>

#include "server/backend_objects.h"
#include "server/inference_request.h"

using inflight::server::FromHandle;
using inflight::server::InferenceRequest;
using inflight::server::RequestInput;
using inflight::server::ToHandle;

namespace {

InferenceRequest* Req(TRITONBACKEND_Request* r) {
  return FromHandle<InferenceRequest>(r);
}
RequestInput* In(TRITONBACKEND_Input* i) {
  return FromHandle<RequestInput>(i);
}

TRITONSERVER_Error* Err(TRITONSERVER_Error_Code code, const std::string& msg) {
  return TRITONSERVER_ErrorNew(code, msg.c_str());
}

TRITONSERVER_Error* IndexError(const char* what, uint32_t index, size_t count) {
  return Err(TRITONSERVER_ERROR_INVALID_ARG, std::string(what) + " index " + std::to_string(index) +
                                                 " is out of range: the request has " +
                                                 std::to_string(count));
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_RequestId(TRITONBACKEND_Request* request, const char** id) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(id);
  *id = Req(request)->id.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestIsCancelled(TRITONBACKEND_Request* request,
                                                     bool* is_cancelled) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(is_cancelled);
  *is_cancelled = Req(request)->channel->IsCancelled();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationId(TRITONBACKEND_Request* request,
                                                       uint64_t* id) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(id);
  if (!Req(request)->correlation_id_string.empty()) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG,
               "correlation ID of request '" + Req(request)->id +
                   "' is a string; use TRITONBACKEND_RequestCorrelationIdString");
  }
  *id = Req(request)->correlation_id;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationIdString(TRITONBACKEND_Request* request,
                                                             const char** id) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(id);
  if (Req(request)->correlation_id_string.empty()) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG,
               "correlation ID of request '" + Req(request)->id +
                   "' is an integer; use TRITONBACKEND_RequestCorrelationId");
  }
  *id = Req(request)->correlation_id_string.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestFlags(TRITONBACKEND_Request* request, uint32_t* flags) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(flags);
  *flags = Req(request)->flags;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_InferenceRequestTimeoutMicroseconds(
    TRITONBACKEND_Request* request, uint64_t* timeout) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(timeout);
  *timeout = Req(request)->timeout_us;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestParameterCount(TRITONBACKEND_Request* request,
                                                        uint32_t* count) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(count);
  *count = static_cast<uint32_t>(Req(request)->parameters.size());
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestParameter(TRITONBACKEND_Request* request,
                                                   const uint32_t index, const char** key,
                                                   TRITONSERVER_ParameterType* type,
                                                   const void** vvalue) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(key);
  INFLIGHT_API_REQUIRE(type);
  INFLIGHT_API_REQUIRE(vvalue);
  const auto& params = Req(request)->parameters;
  if (index >= params.size()) return IndexError("parameter", index, params.size());
  *key = params[index].key.c_str();
  *type = params[index].type;
  *vvalue = params[index].ValuePointer();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request* request,
                                                    uint32_t* count) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(count);
  *count = static_cast<uint32_t>(Req(request)->inputs.size());
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestInputName(TRITONBACKEND_Request* request,
                                                   const uint32_t index, const char** input_name) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(input_name);
  const auto& inputs = Req(request)->inputs;
  if (index >= inputs.size()) return IndexError("input", index, inputs.size());
  *input_name = inputs[index].name.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestInput(TRITONBACKEND_Request* request, const char* name,
                                               TRITONBACKEND_Input** input) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(name);
  INFLIGHT_API_REQUIRE(input);
  for (auto& in : Req(request)->inputs) {
    if (in.name == name) {
      *input = ToHandle<TRITONBACKEND_Input>(&in);
      return nullptr;
    }
  }
  *input = nullptr;
  return Err(TRITONSERVER_ERROR_INVALID_ARG, "unknown request input name " + std::string(name));
}

TRITONSERVER_Error* TRITONBACKEND_RequestInputByIndex(TRITONBACKEND_Request* request,
                                                      const uint32_t index,
                                                      TRITONBACKEND_Input** input) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(input);
  auto& inputs = Req(request)->inputs;
  if (index >= inputs.size()) return IndexError("input", index, inputs.size());
  *input = ToHandle<TRITONBACKEND_Input>(&inputs[index]);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request* request,
                                                     uint32_t* count) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(count);
  *count = static_cast<uint32_t>(Req(request)->requested_outputs.size());
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request* request,
                                                    const uint32_t index,
                                                    const char** output_name) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(output_name);
  const auto& outputs = Req(request)->requested_outputs;
  if (index >= outputs.size()) return IndexError("requested output", index, outputs.size());
  *output_name = outputs[index].c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestOutputBufferProperties(
    TRITONBACKEND_Request* request, const char* name, size_t* byte_size,
    TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(name);
  (void)byte_size;  // in/out hint in Triton; every output lands in CPU memory here
  if (memory_type != nullptr) *memory_type = TRITONSERVER_MEMORY_CPU;
  if (memory_type_id != nullptr) *memory_type_id = 0;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request,
                                                 uint32_t release_flags) {
  INFLIGHT_API_REQUIRE(request);
  if (release_flags != TRITONSERVER_REQUEST_RELEASE_ALL) {
    return Err(TRITONSERVER_ERROR_UNSUPPORTED,
               "TRITONBACKEND_RequestRelease: release flags " + std::to_string(release_flags) +
                   " are not supported; only TRITONSERVER_REQUEST_RELEASE_ALL (1) is");
  }
  delete Req(request);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_InputProperties(TRITONBACKEND_Input* input, const char** name,
                                                  TRITONSERVER_DataType* datatype,
                                                  const int64_t** shape, uint32_t* dims_count,
                                                  uint64_t* byte_size, uint32_t* buffer_count) {
  INFLIGHT_API_REQUIRE(input);
  const RequestInput* in = In(input);
  if (name != nullptr) *name = in->name.c_str();
  if (datatype != nullptr) *datatype = in->datatype;
  if (shape != nullptr) *shape = in->shape.data();
  if (dims_count != nullptr) *dims_count = static_cast<uint32_t>(in->shape.size());
  if (byte_size != nullptr) *byte_size = in->byte_size;
  if (buffer_count != nullptr) *buffer_count = static_cast<uint32_t>(in->buffers.size());
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_InputPropertiesForHostPolicy(
    TRITONBACKEND_Input* input, const char* host_policy_name, const char** name,
    TRITONSERVER_DataType* datatype, const int64_t** shape, uint32_t* dims_count,
    uint64_t* byte_size, uint32_t* buffer_count) {
  (void)host_policy_name;  // one host policy: every input is in host memory
  return TRITONBACKEND_InputProperties(input, name, datatype, shape, dims_count, byte_size,
                                       buffer_count);
}

TRITONSERVER_Error* TRITONBACKEND_InputBuffer(TRITONBACKEND_Input* input, const uint32_t index,
                                              const void** buffer, uint64_t* buffer_byte_size,
                                              TRITONSERVER_MemoryType* memory_type,
                                              int64_t* memory_type_id) {
  INFLIGHT_API_REQUIRE(input);
  INFLIGHT_API_REQUIRE(buffer);
  INFLIGHT_API_REQUIRE(buffer_byte_size);
  const RequestInput* in = In(input);
  if (index >= in->buffers.size()) {
    *buffer = nullptr;
    *buffer_byte_size = 0;
    return Err(TRITONSERVER_ERROR_INVALID_ARG,
               "input '" + in->name + "' buffer index " + std::to_string(index) +
                   " is out of range: it has " + std::to_string(in->buffers.size()) + " buffers");
  }
  *buffer = in->buffers[index].data;
  *buffer_byte_size = in->buffers[index].byte_size;
  if (memory_type != nullptr) *memory_type = TRITONSERVER_MEMORY_CPU;
  if (memory_type_id != nullptr) *memory_type_id = 0;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_InputBufferForHostPolicy(
    TRITONBACKEND_Input* input, const char* host_policy_name, const uint32_t index,
    const void** buffer, uint64_t* buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id) {
  (void)host_policy_name;
  return TRITONBACKEND_InputBuffer(input, index, buffer, buffer_byte_size, memory_type,
                                   memory_type_id);
}

TRITONSERVER_Error* TRITONBACKEND_InputBufferAttributes(
    TRITONBACKEND_Input* input, const uint32_t index, const void** buffer,
    TRITONSERVER_BufferAttributes** buffer_attributes) {
  INFLIGHT_API_REQUIRE(input);
  INFLIGHT_API_REQUIRE(buffer);
  INFLIGHT_API_REQUIRE(buffer_attributes);
  RequestInput* in = In(input);
  if (index >= in->buffers.size()) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG,
               "input '" + in->name + "' buffer index " + std::to_string(index) +
                   " is out of range: it has " + std::to_string(in->buffers.size()) + " buffers");
  }
  auto& b = in->buffers[index];
  b.attributes.memory_type = TRITONSERVER_MEMORY_CPU;
  b.attributes.memory_type_id = 0;
  b.attributes.byte_size = b.byte_size;
  *buffer = b.data;
  *buffer_attributes = &b.attributes;
  return nullptr;
}

}  // extern "C"
