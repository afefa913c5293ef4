// Conversions between inflight::Status and TRITONSERVER_Error*, and an owning handle for the
// latter.
#pragma once

#include <memory>

#include "inflight/status.h"
#include "triton/core/tritonserver.h"

namespace inflight::backend {

struct TritonErrorDeleter {
  void operator()(TRITONSERVER_Error* e) const { TRITONSERVER_ErrorDelete(e); }
};
using TritonErrorPtr = std::unique_ptr<TRITONSERVER_Error, TritonErrorDeleter>;

// nullptr for ok; the caller (or Triton, when returned from an entry point) owns the result.
TRITONSERVER_Error* ToTritonError(const Status& status);
// Takes ownership of `error` and deletes it.
Status FromTritonError(TRITONSERVER_Error* error);

}  // namespace inflight::backend

// Evaluates a TRITONSERVER_Error* expression; on error returns it as a Status.
#define RETURN_IF_TRITON_ERROR(expr)                                          \
  do {                                                                        \
    TRITONSERVER_Error* _terr = (expr);                                       \
    if (_terr != nullptr) return ::inflight::backend::FromTritonError(_terr); \
  } while (0)
