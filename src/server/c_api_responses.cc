// TRITONBACKEND_Response*, TRITONBACKEND_Output* and TRITONBACKEND_ResponseFactory*.
#include <string>

#include "server/inference_request.h"

using inflight::Status;
using inflight::server::BackendResponse;
using inflight::server::FromHandle;
using inflight::server::FromTritonError;
using inflight::server::InferenceRequest;
using inflight::server::ResponseFactory;
using inflight::server::ResponseOutput;
using inflight::server::Tensor;
using inflight::server::ToHandle;
using inflight::server::ToTritonError;

namespace {

BackendResponse* Resp(TRITONBACKEND_Response* r) {
  return FromHandle<BackendResponse>(r);
}

TRITONSERVER_Error* Err(TRITONSERVER_Error_Code code, const std::string& msg) {
  return TRITONSERVER_ErrorNew(code, msg.c_str());
}

TRITONSERVER_Error* SetParameter(TRITONBACKEND_Response* response, const char* name,
                                 inflight::server::ParameterValue value) {
  INFLIGHT_API_REQUIRE(response);
  INFLIGHT_API_REQUIRE(name);
  Resp(response)->parameters[name] = std::move(value);
  return nullptr;
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryNew(TRITONBACKEND_ResponseFactory** factory,
                                                     TRITONBACKEND_Request* request) {
  INFLIGHT_API_REQUIRE(factory);
  INFLIGHT_API_REQUIRE(request);
  *factory = ToHandle<TRITONBACKEND_ResponseFactory>(
      new ResponseFactory(FromHandle<InferenceRequest>(request)->channel));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory* factory) {
  delete FromHandle<ResponseFactory>(factory);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseFactorySendFlags(TRITONBACKEND_ResponseFactory* factory,
                                                           const uint32_t send_flags) {
  INFLIGHT_API_REQUIRE(factory);
  return ToTritonError(FromHandle<ResponseFactory>(factory)->channel->SendFlags(send_flags));
}

TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryIsCancelled(TRITONBACKEND_ResponseFactory* factory,
                                                             bool* is_cancelled) {
  INFLIGHT_API_REQUIRE(factory);
  INFLIGHT_API_REQUIRE(is_cancelled);
  *is_cancelled = FromHandle<ResponseFactory>(factory)->channel->IsCancelled();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseNew(TRITONBACKEND_Response** response,
                                              TRITONBACKEND_Request* request) {
  INFLIGHT_API_REQUIRE(response);
  INFLIGHT_API_REQUIRE(request);
  *response = ToHandle<TRITONBACKEND_Response>(
      new BackendResponse(FromHandle<InferenceRequest>(request)->channel));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseNewFromFactory(TRITONBACKEND_Response** response,
                                                         TRITONBACKEND_ResponseFactory* factory) {
  INFLIGHT_API_REQUIRE(response);
  INFLIGHT_API_REQUIRE(factory);
  *response = ToHandle<TRITONBACKEND_Response>(
      new BackendResponse(FromHandle<ResponseFactory>(factory)->channel));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response* response) {
  delete Resp(response);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetStringParameter(TRITONBACKEND_Response* response,
                                                             const char* name, const char* value) {
  INFLIGHT_API_REQUIRE(value);
  return SetParameter(response, name, std::string(value));
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetIntParameter(TRITONBACKEND_Response* response,
                                                          const char* name, const int64_t value) {
  return SetParameter(response, name, static_cast<std::int64_t>(value));
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetBoolParameter(TRITONBACKEND_Response* response,
                                                           const char* name, const bool value) {
  return SetParameter(response, name, value);
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetDoubleParameter(TRITONBACKEND_Response* response,
                                                             const char* name, const double value) {
  return SetParameter(response, name, value);
}

TRITONSERVER_Error* TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response* response,
                                                 TRITONBACKEND_Output** output, const char* name,
                                                 const TRITONSERVER_DataType datatype,
                                                 const int64_t* shape, const uint32_t dims_count) {
  INFLIGHT_API_REQUIRE(response);
  INFLIGHT_API_REQUIRE(output);
  INFLIGHT_API_REQUIRE(name);
  if (shape == nullptr && dims_count > 0) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG,
               "TRITONBACKEND_ResponseOutput: output '" + std::string(name) + "' has " +
                   std::to_string(dims_count) + " dims but a null shape");
  }
  BackendResponse* r = Resp(response);
  for (const auto& o : r->outputs) {
    if (o->name == name) {
      return Err(TRITONSERVER_ERROR_ALREADY_EXISTS,
                 "response already has an output named '" + std::string(name) + "'");
    }
  }
  auto out = std::make_unique<ResponseOutput>();
  out->name = name;
  out->datatype = datatype;
  out->shape.assign(shape, shape + dims_count);
  *output = ToHandle<TRITONBACKEND_Output>(out.get());
  r->outputs.push_back(std::move(out));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output* output, void** buffer,
                                               const uint64_t buffer_byte_size,
                                               TRITONSERVER_MemoryType* memory_type,
                                               int64_t* memory_type_id) {
  INFLIGHT_API_REQUIRE(output);
  INFLIGHT_API_REQUIRE(buffer);
  INFLIGHT_API_REQUIRE(memory_type);
  INFLIGHT_API_REQUIRE(memory_type_id);
  auto* out = FromHandle<ResponseOutput>(output);
  if (out->buffer_allocated) {
    return Err(TRITONSERVER_ERROR_ALREADY_EXISTS,
               "output '" + out->name + "' already has a buffer");
  }
  out->buffer.resize(buffer_byte_size);
  out->buffer_allocated = true;
  // NOTE: every response leaves the process through a host-side frontend, so outputs always live
  // in CPU memory; a backend that asked for GPU reads the actual type back, as Triton allows.
  *memory_type = TRITONSERVER_MEMORY_CPU;
  *memory_type_id = 0;
  out->attributes.memory_type = TRITONSERVER_MEMORY_CPU;
  out->attributes.memory_type_id = 0;
  out->attributes.byte_size = buffer_byte_size;
  *buffer = out->buffer.data();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_OutputBufferAttributes(
    TRITONBACKEND_Output* output, TRITONSERVER_BufferAttributes** buffer_attributes) {
  INFLIGHT_API_REQUIRE(output);
  INFLIGHT_API_REQUIRE(buffer_attributes);
  *buffer_attributes = &FromHandle<ResponseOutput>(output)->attributes;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSend(TRITONBACKEND_Response* response,
                                               const uint32_t send_flags,
                                               TRITONSERVER_Error* error) {
  INFLIGHT_API_REQUIRE(response);
  // The response is ours from here on, whatever happens; `error` stays the caller's.
  std::unique_ptr<BackendResponse> r(Resp(response));
  std::optional<Status> status;
  std::vector<Tensor> outputs;
  if (error != nullptr) {
    status = FromTritonError(error);
  } else {
    outputs.reserve(r->outputs.size());
    for (auto& o : r->outputs) {
      Tensor t;
      t.name = std::move(o->name);
      t.datatype = o->datatype;
      t.shape = std::move(o->shape);
      t.data = std::move(o->buffer);
      outputs.push_back(std::move(t));
    }
  }
  return ToTritonError(r->channel->Send(std::move(outputs), std::move(r->parameters), send_flags,
                                        std::move(status)));
}

}  // extern "C"
