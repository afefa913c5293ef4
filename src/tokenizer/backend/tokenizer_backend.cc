// libtriton_inflight_tokenizer.so: the preprocessing and postprocessing models of the LLM ensemble.
// The entry points only move data between Triton and host tensors; TextModelState does the work.
#include <exception>

#include "backend/api_version.h"
#include "backend/triton_log.h"
#include "common/logging.h"
#include "common/steady_clock.h"
#include "tokenizer/backend/model_state.h"
#include "tokenizer/backend/triton_io.h"
#include "triton/core/tritonbackend.h"

namespace inflight::tokenizer::backend {
namespace {

uint64_t NowNs() {
  return static_cast<uint64_t>(SteadyNowNs());
}

Status LoadModel(TRITONBACKEND_Model* model) {
  const char* name = nullptr;
  RETURN_IF_ERROR(FromTritonError(TRITONBACKEND_ModelName(model, &name)));
  TRITONSERVER_Message* message = nullptr;
  RETURN_IF_ERROR(FromTritonError(TRITONBACKEND_ModelConfig(model, 1, &message)));
  const char* json = nullptr;
  size_t size = 0;
  Status st = FromTritonError(TRITONSERVER_MessageSerializeToJson(message, &json, &size));
  Result<std::unique_ptr<TextModelState>> state =
      st.ok() ? CreateTextModelState(name, std::string_view(json, size))
              : Result<std::unique_ptr<TextModelState>>(st);
  (void)FromTritonError(TRITONSERVER_MessageDelete(message));
  if (!state.ok()) return state.status();
  RETURN_IF_ERROR(FromTritonError(TRITONBACKEND_ModelSetState(model, state->get())));
  (void)std::move(state).value().release();  // owned by the model now; freed in ModelFinalize
  return Status::Ok();
}

// Everything that can fail for one request; the caller turns a failure into its error response.
Status Handle(const TextModelState& state, TRITONBACKEND_Request* request,
              TRITONBACKEND_Response* response) {
  ASSIGN_OR_RETURN(auto inputs, ReadInputs(request));
  ASSIGN_OR_RETURN(auto requested, RequestedOutputs(request));
  ASSIGN_OR_RETURN(auto outputs, state.Run(inputs, std::move(requested)));
  return WriteOutputs(response, outputs);
}

Status HandleNoThrow(const TextModelState& state, TRITONBACKEND_Request* request,
                     TRITONBACKEND_Response* response) {
  try {
    return Handle(state, request, response);
  } catch (const std::exception& e) {
    return Internal(std::string("model '") + state.name + "': " + e.what());
  } catch (...) {
    return Internal("model '" + state.name + "': unknown exception");
  }
}

// Answers one request (exactly one response, FINAL) and releases it.
void Execute(TRITONBACKEND_ModelInstance* instance, const TextModelState& state,
             TRITONBACKEND_Request* request) {
  const uint64_t start_ns = NowNs();
  TRITONBACKEND_Response* response = nullptr;
  Status st = FromTritonError(TRITONBACKEND_ResponseNew(&response, request));
  if (st.ok()) {
    st = HandleNoThrow(state, request, response);
    TRITONSERVER_Error* error = ToTritonError(st);
    Status sent = FromTritonError(
        TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error));
    if (error != nullptr) TRITONSERVER_ErrorDelete(error);
    if (!sent.ok()) LOG_ERROR("model '{}': cannot send a response: {}", state.name, sent.message());
  } else {
    LOG_ERROR("model '{}': cannot create a response: {}", state.name, st.message());
  }
  const uint64_t end_ns = NowNs();
  (void)FromTritonError(TRITONBACKEND_ModelInstanceReportStatistics(
      instance, request, st.ok(), start_ns, start_ns, end_ns, end_ns));
  Status released =
      FromTritonError(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
  if (!released.ok())
    LOG_ERROR("model '{}': cannot release a request: {}", state.name, released.message());
}

}  // namespace
}  // namespace inflight::tokenizer::backend

using inflight::tokenizer::backend::FromTritonError;
using inflight::tokenizer::backend::TextModelState;
using inflight::tokenizer::backend::ToTritonError;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* /*backend*/) {
  inflight::backend::UseTritonLog();
  return inflight::backend::CheckBackendApiVersion("inflight_tokenizer");
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  try {
    return ToTritonError(inflight::tokenizer::backend::LoadModel(model));
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, e.what());
  }
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelState(model, &state);
  if (err != nullptr) return err;
  delete static_cast<TextModelState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* /*instance*/) {
  return nullptr;  // instances share the model's tokenizer: Encode/Decode are thread-safe
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* /*instance*/) {
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  // Before any request is touched an error hands them all back to the core; after, every request
  // is answered and released here.
  TRITONBACKEND_Model* model = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceModel(instance, &model);
  if (err != nullptr) return err;
  void* state = nullptr;
  err = TRITONBACKEND_ModelState(model, &state);
  if (err != nullptr) return err;
  const uint64_t start_ns = inflight::tokenizer::backend::NowNs();
  for (uint32_t i = 0; i < request_count; ++i) {
    inflight::tokenizer::backend::Execute(instance, *static_cast<const TextModelState*>(state),
                                          requests[i]);
  }
  const uint64_t end_ns = inflight::tokenizer::backend::NowNs();
  (void)FromTritonError(TRITONBACKEND_ModelInstanceReportBatchStatistics(
      instance, request_count, start_ns, start_ns, end_ns, end_ns));
  return nullptr;
}

}  // extern "C"
