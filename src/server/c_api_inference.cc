// TRITONSERVER_InferenceRequest*, _InferenceResponse*, _ResponseAllocator* and ServerInferAsync:
// what a backend uses to call another model of the server (Triton's BLS C API), on the core's
// Server::Infer; the responses and their allocator are c_api_inference_response.cc's. Semantics as
// tritonserver's:
//   - input data is read when appended (copied: the caller's buffer may go right after);
//   - every response gets its output buffers from the request's allocator (start_fn once, then
//     alloc_fn per output; release_fn when the response is deleted); only host memory is served;
//   - a decoupled model's flag-only end reaches the response callback as (nullptr, FINAL);
//   - the release callback runs once the request's last response has been delivered, after which
//     the caller may delete or reuse the request;
//   - errors found before the request reaches the model are ServerInferAsync's return value (the
//     request is then not released: it is still the caller's).
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/c_api_inference_response.h"
#include "server/c_api_objects.h"
#include "server/server_api.h"
#include "server/server_core.h"

namespace {

using inflight::server::InferRequest;
using inflight::server::InferResponse;
using inflight::server::InflightRequest;
using inflight::server::ParameterValue;
using inflight::server::Server;
using inflight::server::Tensor;

// One ServerInferAsync of a request: shared by the request (for Cancel) and the core's callback.
class InferCall {
 public:
  void SetHandle(std::shared_ptr<InflightRequest> handle) {
    std::lock_guard lock(mu_);
    handle_ = std::move(handle);
    if (cancelled_) handle_->Cancel();
  }
  void Cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (handle_) handle_->Cancel();
  }
  bool IsCancelled() {
    std::lock_guard lock(mu_);
    return cancelled_;
  }

 private:
  std::mutex mu_;
  std::shared_ptr<InflightRequest> handle_;
  bool cancelled_ = false;
};

}  // namespace

struct TRITONSERVER_InferenceRequest {
  Server* server = nullptr;
  InferRequest request;  // inputs in the order added
  uint32_t flags = 0;
  TRITONSERVER_InferenceRequestReleaseFn_t release_fn = nullptr;
  void* release_userp = nullptr;
  TRITONSERVER_ResponseAllocator* allocator = nullptr;
  void* allocator_userp = nullptr;
  TRITONSERVER_InferenceResponseCompleteFn_t response_fn = nullptr;
  void* response_userp = nullptr;
  std::shared_ptr<InferCall> call;  // the latest ServerInferAsync

  Tensor* FindInput(const char* name) {
    for (Tensor& t : request.inputs) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
};

namespace {

// TRITONBACKEND_ModelServer hands out the core (a ServerCore) as the TRITONSERVER_Server handle.
Server* CoreOf(TRITONSERVER_Server* server) {
  return reinterpret_cast<inflight::server::ServerCore*>(server);
}

TRITONSERVER_Error* Err(TRITONSERVER_Error_Code code, const std::string& message) {
  return TRITONSERVER_ErrorNew(code, message.c_str());
}

TRITONSERVER_Error* SetParameter(TRITONSERVER_InferenceRequest* r, const char* key,
                                 ParameterValue value) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(key);
  r->request.parameters[key] = std::move(value);
  return nullptr;
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONSERVER_InferenceRequestNew(TRITONSERVER_InferenceRequest** request,
                                                     TRITONSERVER_Server* server,
                                                     const char* model_name,
                                                     const int64_t model_version) {
  INFLIGHT_API_REQUIRE(request);
  INFLIGHT_API_REQUIRE(server);
  INFLIGHT_API_REQUIRE(model_name);
  auto* r = new TRITONSERVER_InferenceRequest;
  r->server = CoreOf(server);
  r->request.model_name = model_name;
  r->request.model_version = model_version;
  *request = r;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestDelete(TRITONSERVER_InferenceRequest* request) {
  delete request;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestId(TRITONSERVER_InferenceRequest* r,
                                                    const char** id) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(id);
  *id = r->request.id.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetId(TRITONSERVER_InferenceRequest* r,
                                                       const char* id) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(id);
  r->request.id = id;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestFlags(TRITONSERVER_InferenceRequest* r,
                                                       uint32_t* flags) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(flags);
  *flags = r->flags;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetFlags(TRITONSERVER_InferenceRequest* r,
                                                          uint32_t flags) {
  INFLIGHT_API_REQUIRE(r);
  r->flags = flags;
  // The core reads sequence flags as the KServe parameters they travel as.
  r->request.parameters["sequence_start"] = (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) != 0;
  r->request.parameters["sequence_end"] = (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END) != 0;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestCorrelationId(TRITONSERVER_InferenceRequest* r,
                                                               uint64_t* correlation_id) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(correlation_id);
  auto it = r->request.parameters.find("sequence_id");
  const auto* id = it == r->request.parameters.end() ? nullptr : std::get_if<int64_t>(&it->second);
  *correlation_id = id == nullptr ? 0 : static_cast<uint64_t>(*id);
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetCorrelationId(TRITONSERVER_InferenceRequest* r,
                                                                  uint64_t correlation_id) {
  return SetParameter(r, "sequence_id", static_cast<int64_t>(correlation_id));
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestPriorityUInt64(TRITONSERVER_InferenceRequest* r,
                                                                uint64_t* priority) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(priority);
  auto it = r->request.parameters.find("priority");
  const auto* p = it == r->request.parameters.end() ? nullptr : std::get_if<int64_t>(&it->second);
  *priority = p == nullptr ? 0 : static_cast<uint64_t>(*p);
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetPriorityUInt64(TRITONSERVER_InferenceRequest* r,
                                                                   uint64_t priority) {
  return SetParameter(r, "priority", static_cast<int64_t>(priority));
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestTimeoutMicroseconds(
    TRITONSERVER_InferenceRequest* r, uint64_t* timeout_us) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(timeout_us);
  auto it = r->request.parameters.find("timeout");
  const auto* t = it == r->request.parameters.end() ? nullptr : std::get_if<int64_t>(&it->second);
  *timeout_us = t == nullptr ? 0 : static_cast<uint64_t>(*t);
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(
    TRITONSERVER_InferenceRequest* r, uint64_t timeout_us) {
  return SetParameter(r, "timeout", static_cast<int64_t>(timeout_us));
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddInput(TRITONSERVER_InferenceRequest* r,
                                                          const char* name,
                                                          const TRITONSERVER_DataType datatype,
                                                          const int64_t* shape,
                                                          uint64_t dim_count) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(name);
  if (dim_count > 0) INFLIGHT_API_REQUIRE(shape);
  if (r->FindInput(name) != nullptr) {
    return Err(TRITONSERVER_ERROR_ALREADY_EXISTS,
               "input '" + std::string(name) + "' was already added to the request");
  }
  if (TRITONSERVER_DataTypeByteSize(datatype) == 0 && datatype != TRITONSERVER_TYPE_BYTES) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG, "input '" + std::string(name) + "': datatype " +
                                                   std::to_string(datatype) +
                                                   " is not a Triton data type");
  }
  Tensor t;
  t.name = name;
  t.datatype = datatype;
  t.shape.assign(shape, shape + dim_count);
  r->request.inputs.push_back(std::move(t));
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveInput(TRITONSERVER_InferenceRequest* r,
                                                             const char* name) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(name);
  auto& inputs = r->request.inputs;
  auto it =
      std::find_if(inputs.begin(), inputs.end(), [&](const Tensor& t) { return t.name == name; });
  if (it == inputs.end()) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG, "input '" + std::string(name) + "' does not exist");
  }
  inputs.erase(it);
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllInputs(TRITONSERVER_InferenceRequest* r) {
  INFLIGHT_API_REQUIRE(r);
  r->request.inputs.clear();
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestAppendInputData(
    TRITONSERVER_InferenceRequest* r, const char* name, const void* base, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t /*memory_type_id*/) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(name);
  if (byte_size > 0) INFLIGHT_API_REQUIRE(base);
  Tensor* t = r->FindInput(name);
  if (t == nullptr) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG,
               "input '" + std::string(name) + "' does not exist (add it first)");
  }
  if (memory_type == TRITONSERVER_MEMORY_GPU) {
    return Err(TRITONSERVER_ERROR_UNSUPPORTED,
               "input '" + std::string(name) +
                   "': GPU memory is not accepted here; pass the data in host memory");
  }
  const char* bytes = static_cast<const char*>(base);
  t->data.insert(t->data.end(), bytes, bytes + byte_size);
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllInputData(
    TRITONSERVER_InferenceRequest* r, const char* name) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(name);
  Tensor* t = r->FindInput(name);
  if (t == nullptr) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG, "input '" + std::string(name) + "' does not exist");
  }
  t->data.clear();
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddRequestedOutput(
    TRITONSERVER_InferenceRequest* r, const char* name) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(name);
  auto& outputs = r->request.requested_outputs;
  if (std::find(outputs.begin(), outputs.end(), name) == outputs.end()) outputs.push_back(name);
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveRequestedOutput(
    TRITONSERVER_InferenceRequest* r, const char* name) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(name);
  auto& outputs = r->request.requested_outputs;
  outputs.erase(std::remove(outputs.begin(), outputs.end(), name), outputs.end());
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs(
    TRITONSERVER_InferenceRequest* r) {
  INFLIGHT_API_REQUIRE(r);
  r->request.requested_outputs.clear();
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetReleaseCallback(
    TRITONSERVER_InferenceRequest* r, TRITONSERVER_InferenceRequestReleaseFn_t release_fn,
    void* release_userp) {
  INFLIGHT_API_REQUIRE(r);
  r->release_fn = release_fn;
  r->release_userp = release_userp;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetResponseCallback(
    TRITONSERVER_InferenceRequest* r, TRITONSERVER_ResponseAllocator* allocator,
    void* allocator_userp, TRITONSERVER_InferenceResponseCompleteFn_t response_fn,
    void* response_userp) {
  INFLIGHT_API_REQUIRE(r);
  r->allocator = allocator;
  r->allocator_userp = allocator_userp;
  r->response_fn = response_fn;
  r->response_userp = response_userp;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestCancel(TRITONSERVER_InferenceRequest* r) {
  INFLIGHT_API_REQUIRE(r);
  if (r->call == nullptr) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG,
               "the request was not sent (TRITONSERVER_ServerInferAsync): nothing to cancel");
  }
  r->call->Cancel();
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestIsCancelled(TRITONSERVER_InferenceRequest* r,
                                                             bool* is_cancelled) {
  INFLIGHT_API_REQUIRE(r);
  INFLIGHT_API_REQUIRE(is_cancelled);
  *is_cancelled = r->call != nullptr && r->call->IsCancelled();
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetStringParameter(
    TRITONSERVER_InferenceRequest* r, const char* key, const char* value) {
  INFLIGHT_API_REQUIRE(value);
  return SetParameter(r, key, std::string(value));
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetIntParameter(TRITONSERVER_InferenceRequest* r,
                                                                 const char* key,
                                                                 const int64_t value) {
  return SetParameter(r, key, value);
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetBoolParameter(TRITONSERVER_InferenceRequest* r,
                                                                  const char* key,
                                                                  const bool value) {
  return SetParameter(r, key, value);
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetDoubleParameter(
    TRITONSERVER_InferenceRequest* r, const char* key, const double value) {
  return SetParameter(r, key, value);
}

TRITONSERVER_Error* TRITONSERVER_ServerInferAsync(TRITONSERVER_Server* server,
                                                  TRITONSERVER_InferenceRequest* r,
                                                  TRITONSERVER_InferenceTrace* trace) {
  INFLIGHT_API_REQUIRE(server);
  INFLIGHT_API_REQUIRE(r);
  if (trace != nullptr) {
    return Err(TRITONSERVER_ERROR_UNSUPPORTED, "request tracing is not implemented");
  }
  if (r->response_fn == nullptr) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG,
               "the request has no response callback "
               "(TRITONSERVER_InferenceRequestSetResponseCallback)");
  }
  if (r->release_fn == nullptr) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG,
               "the request has no release callback "
               "(TRITONSERVER_InferenceRequestSetReleaseCallback)");
  }
  auto call = std::make_shared<InferCall>();
  r->call = call;
  // NOTE: nothing below may touch `r` once Infer has been called: its release callback, run by the
  // last response, may delete it at once.
  auto deliver = [r, allocator = r->allocator, allocator_userp = r->allocator_userp,
                  response_fn = r->response_fn, response_userp = r->response_userp,
                  release_fn = r->release_fn, release_userp = r->release_userp,
                  call](InferResponse response) {
    const bool last = response.is_final || response.error.has_value();
    const bool flag_only = response.is_final && !response.error && response.outputs.empty();
    const uint32_t flags = last ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0;
    if (flag_only) {
      response_fn(nullptr, flags, response_userp);
    } else {
      auto made =
          inflight::server::MakeInferenceResponse(std::move(response), allocator, allocator_userp);
      response_fn(made.release(), flags, response_userp);  // the callee owns and deletes it
    }
    if (last) release_fn(r, TRITONSERVER_REQUEST_RELEASE_ALL, release_userp);
  };
  auto started = CoreOf(server)->Infer(r->request, std::move(deliver));
  if (!started.ok()) {
    r->call.reset();
    return inflight::server::ToTritonError(started.status());
  }
  call->SetHandle(std::move(*started));
  return nullptr;
}

}  // extern "C"
