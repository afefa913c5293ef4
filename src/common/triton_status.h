// The one mapping between inflight::StatusCode and Triton's error codes, used by the server's C API
// and by both backends. Enum values only: no Triton function is called here.
#pragma once

#include "inflight/status.h"
#include "triton/core/tritonserver.h"

namespace inflight {

inline TRITONSERVER_Error_Code ToTritonCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
    case StatusCode::kUnknown:
      return TRITONSERVER_ERROR_UNKNOWN;
    case StatusCode::kInternal:
      return TRITONSERVER_ERROR_INTERNAL;
    case StatusCode::kNotFound:
      return TRITONSERVER_ERROR_NOT_FOUND;
    case StatusCode::kInvalidArgument:
      return TRITONSERVER_ERROR_INVALID_ARG;
    case StatusCode::kUnavailable:
      return TRITONSERVER_ERROR_UNAVAILABLE;
    case StatusCode::kUnsupported:
      return TRITONSERVER_ERROR_UNSUPPORTED;
    case StatusCode::kAlreadyExists:
      return TRITONSERVER_ERROR_ALREADY_EXISTS;
    case StatusCode::kCancelled:
      return TRITONSERVER_ERROR_CANCELLED;
  }
  return TRITONSERVER_ERROR_UNKNOWN;
}

inline StatusCode FromTritonCode(TRITONSERVER_Error_Code code) {
  switch (code) {
    case TRITONSERVER_ERROR_UNKNOWN:
      return StatusCode::kUnknown;
    case TRITONSERVER_ERROR_INTERNAL:
      return StatusCode::kInternal;
    case TRITONSERVER_ERROR_NOT_FOUND:
      return StatusCode::kNotFound;
    case TRITONSERVER_ERROR_INVALID_ARG:
      return StatusCode::kInvalidArgument;
    case TRITONSERVER_ERROR_UNAVAILABLE:
      return StatusCode::kUnavailable;
    case TRITONSERVER_ERROR_UNSUPPORTED:
      return StatusCode::kUnsupported;
    case TRITONSERVER_ERROR_ALREADY_EXISTS:
      return StatusCode::kAlreadyExists;
    case TRITONSERVER_ERROR_CANCELLED:
      return StatusCode::kCancelled;
  }
  return StatusCode::kUnknown;
}

}  // namespace inflight
