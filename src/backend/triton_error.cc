#include "backend/triton_error.h"

#include "common/triton_status.h"

namespace inflight::backend {

TRITONSERVER_Error* ToTritonError(const Status& status) {
  if (status.ok()) return nullptr;
  return TRITONSERVER_ErrorNew(ToTritonCode(status.code()), status.message().c_str());
}

Status FromTritonError(TRITONSERVER_Error* error) {
  if (error == nullptr) return Status::Ok();
  TritonErrorPtr owned(error);
  return {FromTritonCode(TRITONSERVER_ErrorCode(error)), TRITONSERVER_ErrorMessage(error)};
}

}  // namespace inflight::backend
