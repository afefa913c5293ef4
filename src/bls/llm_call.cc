#include "bls/llm_call.h"

#include <cstdlib>

#include "backend/triton_error.h"
#include "common/logging.h"

namespace inflight::bls {
namespace {

using backend::FromTritonError;

TRITONSERVER_Error* Allocate(TRITONSERVER_ResponseAllocator*, const char* /*name*/,
                             size_t byte_size, TRITONSERVER_MemoryType, int64_t, void*,
                             void** buffer, void** buffer_userp,
                             TRITONSERVER_MemoryType* actual_memory_type,
                             int64_t* actual_memory_type_id) {
  *buffer = byte_size == 0 ? nullptr : std::malloc(byte_size);
  *buffer_userp = nullptr;
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  if (byte_size > 0 && *buffer == nullptr) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        ("out of host memory for " + std::to_string(byte_size) + " bytes of output").c_str());
  }
  return nullptr;
}

TRITONSERVER_Error* Release(TRITONSERVER_ResponseAllocator*, void* buffer, void*, size_t,
                            TRITONSERVER_MemoryType, int64_t) {
  std::free(buffer);
  return nullptr;
}

// What the response callback needs until the last response: the call, kept alive by it.
struct ResponseContext {
  std::shared_ptr<LlmCall> call;
  std::shared_ptr<LlmSink> sink;
  bool failed = false;
};

Result<std::vector<RawTensor>> ReadOutputs(TRITONSERVER_InferenceResponse* response) {
  uint32_t count = 0;
  RETURN_IF_TRITON_ERROR(TRITONSERVER_InferenceResponseOutputCount(response, &count));
  std::vector<RawTensor> out;
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_DataType datatype;
    const int64_t* shape = nullptr;
    uint64_t dims = 0;
    const void* base = nullptr;
    size_t size = 0;
    TRITONSERVER_MemoryType memory_type;
    int64_t memory_id = 0;
    void* userp = nullptr;
    RETURN_IF_TRITON_ERROR(TRITONSERVER_InferenceResponseOutput(response, i, &name, &datatype,
                                                                &shape, &dims, &base, &size,
                                                                &memory_type, &memory_id, &userp));
    if (memory_type == TRITONSERVER_MEMORY_GPU) {
      return Internal(std::string("output '") + name + "' came in GPU memory");
    }
    RawTensor t{name, datatype, std::vector<int64_t>(shape, shape + dims), {}};
    const char* bytes = static_cast<const char*>(base);
    t.data.assign(bytes, bytes + size);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<HostAllocator>> HostAllocator::Create() {
  auto out = std::unique_ptr<HostAllocator>(new HostAllocator);
  RETURN_IF_TRITON_ERROR(
      TRITONSERVER_ResponseAllocatorNew(&out->allocator_, Allocate, Release, nullptr));
  return out;
}

HostAllocator::~HostAllocator() {
  if (allocator_ != nullptr)
    (void)FromTritonError(TRITONSERVER_ResponseAllocatorDelete(allocator_));
}

Status LlmCall::Start(const std::string& request_id, std::vector<RawTensor> inputs,
                      const std::vector<std::string>& requested_outputs) {
  inputs_ = std::move(inputs);
  TRITONSERVER_InferenceRequest* request = nullptr;
  RETURN_IF_TRITON_ERROR(TRITONSERVER_InferenceRequestNew(&request, server_, model_.c_str(), -1));
  auto fail = [&](TRITONSERVER_Error* err) {
    (void)FromTritonError(TRITONSERVER_InferenceRequestDelete(request));
    return FromTritonError(err);
  };
  if (auto* e = TRITONSERVER_InferenceRequestSetId(request, request_id.c_str())) return fail(e);
  for (const RawTensor& t : inputs_) {
    if (auto* e = TRITONSERVER_InferenceRequestAddInput(request, t.name.c_str(), t.datatype,
                                                        t.shape.data(), t.shape.size())) {
      return fail(e);
    }
    if (auto* e = TRITONSERVER_InferenceRequestAppendInputData(
            request, t.name.c_str(), t.data.data(), t.data.size(), TRITONSERVER_MEMORY_CPU, 0)) {
      return fail(e);
    }
  }
  for (const std::string& name : requested_outputs) {
    if (auto* e = TRITONSERVER_InferenceRequestAddRequestedOutput(request, name.c_str())) {
      return fail(e);
    }
  }
  // The release callback holds the call (and so the input tensors) until the server is done.
  auto* keep = new std::shared_ptr<LlmCall>(shared_from_this());
  if (auto* e = TRITONSERVER_InferenceRequestSetReleaseCallback(request, OnRelease, keep)) {
    delete keep;
    return fail(e);
  }
  auto* context = new ResponseContext{shared_from_this(), sink_};
  if (auto* e = TRITONSERVER_InferenceRequestSetResponseCallback(request, allocator_, nullptr,
                                                                 OnResponse, context)) {
    delete context;
    delete keep;
    return fail(e);
  }
  {
    std::lock_guard lock(mu_);
    request_ = request;
  }
  if (auto* e = TRITONSERVER_ServerInferAsync(server_, request, nullptr)) {
    delete context;
    delete keep;
    {
      std::lock_guard lock(mu_);
      request_ = nullptr;
    }
    return fail(e);
  }
  return Status::Ok();
}

void LlmCall::Cancel() {
  std::lock_guard lock(mu_);
  if (request_ != nullptr && !released_) {
    Status st = FromTritonError(TRITONSERVER_InferenceRequestCancel(request_));
    if (!st.ok()) LOG_WARN("cancelling the request to '{}': {}", model_, st.message());
  }
}

void LlmCall::OnRelease(TRITONSERVER_InferenceRequest* request, uint32_t, void* userp) {
  auto* keep = static_cast<std::shared_ptr<LlmCall>*>(userp);
  {
    std::lock_guard lock((*keep)->mu_);
    (*keep)->released_ = true;
    (*keep)->request_ = nullptr;
  }
  (void)FromTritonError(TRITONSERVER_InferenceRequestDelete(request));
  delete keep;
}

void LlmCall::OnResponse(TRITONSERVER_InferenceResponse* response, uint32_t flags, void* userp) {
  auto* context = static_cast<ResponseContext*>(userp);
  const bool final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  if (response != nullptr && !context->failed) {
    // The response owns its error: copy it, do not take it.
    TRITONSERVER_Error* error = TRITONSERVER_InferenceResponseError(response);
    Status st = error == nullptr
                    ? Status::Ok()
                    : FromTritonError(TRITONSERVER_ErrorNew(TRITONSERVER_ErrorCode(error),
                                                            TRITONSERVER_ErrorMessage(error)));
    Result<std::vector<RawTensor>> outputs =
        st.ok() ? ReadOutputs(response) : Result<std::vector<RawTensor>>(st);
    if (outputs.ok()) {
      context->sink->OnLlmResponse(std::move(*outputs), final);
    } else {
      context->failed = true;
      context->sink->OnLlmError(outputs.status());
    }
  }
  if (response != nullptr) (void)FromTritonError(TRITONSERVER_InferenceResponseDelete(response));
  if (final) {
    if (!context->failed) context->sink->OnLlmDone();
    delete context;  // the last reference to the call may go with it
  }
}

}  // namespace inflight::bls
