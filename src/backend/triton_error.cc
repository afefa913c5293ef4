#include "backend/triton_error.h"

namespace inflight::backend {

TRITONSERVER_Error* ToTritonError(const Status& status) {
  if (status.ok()) return nullptr;
  TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_UNKNOWN;
  switch (status.code()) {
    case StatusCode::kOk: return nullptr;
    case StatusCode::kUnknown: code = TRITONSERVER_ERROR_UNKNOWN; break;
    case StatusCode::kInternal: code = TRITONSERVER_ERROR_INTERNAL; break;
    case StatusCode::kNotFound: code = TRITONSERVER_ERROR_NOT_FOUND; break;
    case StatusCode::kInvalidArgument: code = TRITONSERVER_ERROR_INVALID_ARG; break;
    case StatusCode::kUnavailable: code = TRITONSERVER_ERROR_UNAVAILABLE; break;
    case StatusCode::kUnsupported: code = TRITONSERVER_ERROR_UNSUPPORTED; break;
    case StatusCode::kAlreadyExists: code = TRITONSERVER_ERROR_ALREADY_EXISTS; break;
    case StatusCode::kCancelled: code = TRITONSERVER_ERROR_CANCELLED; break;
  }
  return TRITONSERVER_ErrorNew(code, status.message().c_str());
}

Status FromTritonError(TRITONSERVER_Error* error) {
  if (error == nullptr) return Status::Ok();
  TritonErrorPtr owned(error);
  StatusCode code = StatusCode::kUnknown;
  switch (TRITONSERVER_ErrorCode(error)) {
    case TRITONSERVER_ERROR_UNKNOWN: code = StatusCode::kUnknown; break;
    case TRITONSERVER_ERROR_INTERNAL: code = StatusCode::kInternal; break;
    case TRITONSERVER_ERROR_NOT_FOUND: code = StatusCode::kNotFound; break;
    case TRITONSERVER_ERROR_INVALID_ARG: code = StatusCode::kInvalidArgument; break;
    case TRITONSERVER_ERROR_UNAVAILABLE: code = StatusCode::kUnavailable; break;
    case TRITONSERVER_ERROR_UNSUPPORTED: code = StatusCode::kUnsupported; break;
    case TRITONSERVER_ERROR_ALREADY_EXISTS: code = StatusCode::kAlreadyExists; break;
    case TRITONSERVER_ERROR_CANCELLED: code = StatusCode::kCancelled; break;
  }
  return {code, TRITONSERVER_ErrorMessage(error)};
}

}  // namespace inflight::backend
