#include "backend/api_version.h"

#include <string>

#include "triton/core/tritonbackend.h"

namespace inflight::backend {

TRITONSERVER_Error* CheckBackendApiVersion(const char* backend) {
  uint32_t major = 0, minor = 0;
  TRITONSERVER_Error* err = TRITONBACKEND_ApiVersion(&major, &minor);
  if (err != nullptr) return err;
  if (major == TRITONBACKEND_API_VERSION_MAJOR && minor >= TRITONBACKEND_API_VERSION_MINOR) {
    return nullptr;
  }
  const std::string msg = "triton backend API version " + std::to_string(major) + "." +
                          std::to_string(minor) + " is not supported; the " + backend +
                          " backend needs " + std::to_string(TRITONBACKEND_API_VERSION_MAJOR) +
                          "." + std::to_string(TRITONBACKEND_API_VERSION_MINOR) +
                          " or a newer minor version";
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, msg.c_str());
}

}  // namespace inflight::backend
