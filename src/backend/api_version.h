// The backend API version check every Inflight backend makes in TRITONBACKEND_Initialize.
#pragma once

#include "triton/core/tritonserver.h"

namespace inflight::backend {

// nullptr when the host's TRITONBACKEND API is the one `backend` was built for (same major, same or
// newer minor); else an UNSUPPORTED error naming both versions, owned by the caller.
TRITONSERVER_Error* CheckBackendApiVersion(const char* backend);

}  // namespace inflight::backend
