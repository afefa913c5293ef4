// Logging of a backend through its Triton host: TRITONSERVER_LogMessage, so that tritonserver's
// --log-file, --log-info/--log-warning/--log-error and --log-verbose apply to our lines as to its
// own (inflight-server implements the same call, writing through its spdlog logger).
#pragma once

namespace inflight::backend {

// Routes this library's LOG_* lines to the host (common/logging.h). Call in
// TRITONBACKEND_Initialize.
void UseTritonLog();

}  // namespace inflight::backend
