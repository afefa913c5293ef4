#include "server/c_api_inference_response.h"

#include <cstring>
#include <variant>

namespace {

using inflight::Status;
using inflight::server::ParameterValue;
using inflight::server::Tensor;

TRITONSERVER_Error* Err(TRITONSERVER_Error_Code code, const std::string& message) {
  return TRITONSERVER_ErrorNew(code, message.c_str());
}

TRITONSERVER_InferenceResponse::Buffer* OutputBuffer(TRITONSERVER_InferenceResponse* r,
                                                     uint32_t index) {
  return index < r->buffers.size() ? &r->buffers[index] : nullptr;
}

}  // namespace

namespace inflight::server {

std::unique_ptr<TRITONSERVER_InferenceResponse> MakeInferenceResponse(
    InferResponse core, TRITONSERVER_ResponseAllocator* alloc, void* alloc_userp) {
  auto out = std::make_unique<TRITONSERVER_InferenceResponse>();
  out->allocator = alloc;
  for (const auto& [key, value] : core.parameters) out->parameters.emplace_back(key, value);
  out->parameter_bools = std::make_unique<bool[]>(out->parameters.size() + 1);
  out->parameter_strings.reserve(out->parameters.size());
  out->parameter_ints.reserve(out->parameters.size());
  out->parameter_doubles.reserve(out->parameters.size());
  for (size_t i = 0; i < out->parameters.size(); ++i) {
    const ParameterValue& v = out->parameters[i].second;
    if (const auto* b = std::get_if<bool>(&v)) out->parameter_bools[i] = *b;
  }
  if (core.error) {
    out->error = TRITONSERVER_Error{ToTritonCode(core.error->code()), core.error->message()};
    out->response = std::move(core);
    return out;
  }
  if (alloc == nullptr) {
    core.error = Status(inflight::StatusCode::kInvalidArgument,
                        "the request has no response allocator "
                        "(TRITONSERVER_InferenceRequestSetResponseCallback)");
  } else if (alloc->start_fn != nullptr) {
    core.error = inflight::server::TakeTritonError(alloc->start_fn(alloc, alloc_userp));
    if (core.error->ok()) core.error.reset();
  }
  for (size_t i = 0; i < core.outputs.size() && !core.error; ++i) {
    const Tensor& t = core.outputs[i];
    TRITONSERVER_InferenceResponse::Buffer b;
    b.byte_size = t.data.size();
    TRITONSERVER_MemoryType actual = TRITONSERVER_MEMORY_CPU;
    int64_t actual_id = 0;
    Status st = inflight::server::TakeTritonError(
        alloc->alloc_fn(alloc, t.name.c_str(), b.byte_size, TRITONSERVER_MEMORY_CPU, 0, alloc_userp,
                        &b.base, &b.userp, &actual, &actual_id));
    b.memory_type = actual;
    b.memory_type_id = actual_id;
    out->buffers.push_back(b);  // released with the response, whatever happens next
    if (!st.ok()) {
      core.error = Status(st.code(), "allocating output '" + t.name + "' (" +
                                         std::to_string(b.byte_size) + " bytes): " + st.message());
    } else if (b.byte_size > 0 && b.base == nullptr) {
      core.error = Status(inflight::StatusCode::kInternal,
                          "the response allocator gave no buffer for output '" + t.name + "'");
    } else if (b.byte_size > 0 && actual == TRITONSERVER_MEMORY_GPU) {
      core.error = Status(inflight::StatusCode::kUnsupported,
                          "the response allocator gave GPU memory for output '" + t.name +
                              "'; inflight-server delivers outputs in host memory only");
    } else if (b.byte_size > 0) {
      std::memcpy(b.base, t.data.data(), b.byte_size);
    }
  }
  if (core.error) {
    out->error = TRITONSERVER_Error{ToTritonCode(core.error->code()), core.error->message()};
  }
  out->response = std::move(core);
  return out;
}

}  // namespace inflight::server

extern "C" {

TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorNew(
    TRITONSERVER_ResponseAllocator** allocator, TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn,
    TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn,
    TRITONSERVER_ResponseAllocatorStartFn_t start_fn) {
  INFLIGHT_API_REQUIRE(allocator);
  INFLIGHT_API_REQUIRE(alloc_fn);
  INFLIGHT_API_REQUIRE(release_fn);
  *allocator = new TRITONSERVER_ResponseAllocator{alloc_fn, release_fn, start_fn};
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorDelete(
    TRITONSERVER_ResponseAllocator* allocator) {
  delete allocator;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceResponseDelete(TRITONSERVER_InferenceResponse* response) {
  delete response;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceResponseError(TRITONSERVER_InferenceResponse* response) {
  // As Triton: the error belongs to the response and lives as long as it.
  if (response == nullptr || !response->response.error) return nullptr;
  return &response->error;
}

TRITONSERVER_Error* TRITONSERVER_InferenceResponseModel(TRITONSERVER_InferenceResponse* response,
                                                        const char** model_name,
                                                        int64_t* model_version) {
  INFLIGHT_API_REQUIRE(response);
  INFLIGHT_API_REQUIRE(model_name);
  INFLIGHT_API_REQUIRE(model_version);
  *model_name = response->response.model_name.c_str();
  *model_version = response->response.model_version;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceResponseId(TRITONSERVER_InferenceResponse* response,
                                                     const char** request_id) {
  INFLIGHT_API_REQUIRE(response);
  INFLIGHT_API_REQUIRE(request_id);
  *request_id = response->response.id.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceResponseParameterCount(
    TRITONSERVER_InferenceResponse* response, uint32_t* count) {
  INFLIGHT_API_REQUIRE(response);
  INFLIGHT_API_REQUIRE(count);
  *count = static_cast<uint32_t>(response->parameters.size());
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceResponseParameter(
    TRITONSERVER_InferenceResponse* response, const uint32_t index, const char** name,
    TRITONSERVER_ParameterType* type, const void** vvalue) {
  INFLIGHT_API_REQUIRE(response);
  INFLIGHT_API_REQUIRE(name);
  INFLIGHT_API_REQUIRE(type);
  INFLIGHT_API_REQUIRE(vvalue);
  if (index >= response->parameters.size()) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG, "parameter index " + std::to_string(index) +
                                                   " is out of range: the response has " +
                                                   std::to_string(response->parameters.size()));
  }
  const auto& [key, value] = response->parameters[index];
  *name = key.c_str();
  if (const auto* s = std::get_if<std::string>(&value)) {
    *type = TRITONSERVER_PARAMETER_STRING;
    *vvalue = s->c_str();
  } else if (const auto* i = std::get_if<int64_t>(&value)) {
    *type = TRITONSERVER_PARAMETER_INT;
    *vvalue = i;
  } else if (std::holds_alternative<bool>(value)) {
    *type = TRITONSERVER_PARAMETER_BOOL;
    *vvalue = &response->parameter_bools[index];
  } else {
    *type = TRITONSERVER_PARAMETER_DOUBLE;
    *vvalue = &std::get<double>(value);
  }
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutputCount(
    TRITONSERVER_InferenceResponse* response, uint32_t* count) {
  INFLIGHT_API_REQUIRE(response);
  INFLIGHT_API_REQUIRE(count);
  *count = response->response.error ? 0 : static_cast<uint32_t>(response->response.outputs.size());
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutput(TRITONSERVER_InferenceResponse* response,
                                                         const uint32_t index, const char** name,
                                                         TRITONSERVER_DataType* datatype,
                                                         const int64_t** shape, uint64_t* dim_count,
                                                         const void** base, size_t* byte_size,
                                                         TRITONSERVER_MemoryType* memory_type,
                                                         int64_t* memory_type_id, void** userp) {
  INFLIGHT_API_REQUIRE(response);
  const auto* buffer = OutputBuffer(response, index);
  if (response->response.error || buffer == nullptr || index >= response->response.outputs.size()) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "output index " + std::to_string(index) + " is out of range: the response has " +
            std::to_string(response->response.error ? 0 : response->response.outputs.size()));
  }
  const Tensor& t = response->response.outputs[index];
  if (name != nullptr) *name = t.name.c_str();
  if (datatype != nullptr) *datatype = t.datatype;
  if (shape != nullptr) *shape = t.shape.data();
  if (dim_count != nullptr) *dim_count = t.shape.size();
  if (base != nullptr) *base = buffer->base;
  if (byte_size != nullptr) *byte_size = buffer->byte_size;
  if (memory_type != nullptr) *memory_type = buffer->memory_type;
  if (memory_type_id != nullptr) *memory_type_id = buffer->memory_type_id;
  if (userp != nullptr) *userp = buffer->userp;
  return nullptr;
}

}  // extern "C"
