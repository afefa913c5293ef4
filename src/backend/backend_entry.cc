// The TRITONBACKEND_* entry points of libtriton_inflight.so. They only convert and delegate; no
// exception crosses the C ABI.
#include <exception>
#include <memory>
#include <string>

#include "backend/instance_state.h"
#include "backend/model_state.h"
#include "backend/triton_error.h"
#include "backend/triton_log.h"
#include "common/logging.h"
#include "triton/core/tritonbackend.h"

namespace inflight::backend {
namespace {

// Runs `body`, turning any escaping exception into a Triton error.
template <typename F>
TRITONSERVER_Error* Guarded(const char* where, F&& body) {
  try {
    return ToTritonError(body());
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        (std::string(where) + ": unexpected exception: " + e.what()).c_str());
  } catch (...) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                 (std::string(where) + ": unexpected exception").c_str());
  }
}

}  // namespace
}  // namespace inflight::backend

using inflight::Status;
using inflight::backend::Guarded;
using inflight::backend::InstanceState;
using inflight::backend::ModelState;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return Guarded("TRITONBACKEND_Initialize", [&]() -> Status {
    const char* name = nullptr;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_BackendName(backend, &name));
    std::uint32_t major = 0, minor = 0;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
    if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR) {
      return inflight::Unsupported(
          "backend '" + std::string(name) + "' was built for Triton backend API " +
          std::to_string(TRITONBACKEND_API_VERSION_MAJOR) + "." +
          std::to_string(TRITONBACKEND_API_VERSION_MINOR) + " but the server provides " +
          std::to_string(major) + "." + std::to_string(minor));
    }
    inflight::backend::UseTritonLog();
    LOG_INFO("backend {} initialized (API {}.{})", name, major, minor);
    return Status::Ok();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return Guarded("TRITONBACKEND_ModelInitialize", [&]() -> Status {
    ASSIGN_OR_RETURN(auto state, ModelState::Create(model));
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelSetState(model, state.release()));
    return Status::Ok();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  return Guarded("TRITONBACKEND_ModelFinalize", [&]() -> Status {
    void* state = nullptr;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelState(model, &state));
    delete static_cast<ModelState*>(state);
    return Status::Ok();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  return Guarded("TRITONBACKEND_ModelInstanceInitialize", [&]() -> Status {
    TRITONBACKEND_Model* model = nullptr;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
    void* model_state = nullptr;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelState(model, &model_state));
    ASSIGN_OR_RETURN(auto state,
                     InstanceState::Create(*static_cast<ModelState*>(model_state), instance));
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelInstanceSetState(instance, state.release()));
    return Status::Ok();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  return Guarded("TRITONBACKEND_ModelInstanceFinalize", [&]() -> Status {
    void* state = nullptr;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
    delete static_cast<InstanceState*>(state);
    return Status::Ok();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  return Guarded("TRITONBACKEND_ModelInstanceExecute", [&]() -> Status {
    void* state = nullptr;
    RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
    static_cast<InstanceState*>(state)->Execute(requests, request_count);
    return Status::Ok();
  });
}

}  // extern "C"
