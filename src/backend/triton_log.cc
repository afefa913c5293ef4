#include "backend/triton_log.h"

#include <string>

#include "common/logging.h"
#include "triton/core/tritonserver.h"

namespace inflight::backend {
namespace {

// Triton has four levels; debug and trace lines are its verbose ones.
TRITONSERVER_LogLevel TritonLevel(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::critical:
    case spdlog::level::err:
      return TRITONSERVER_LOG_ERROR;
    case spdlog::level::warn:
      return TRITONSERVER_LOG_WARN;
    case spdlog::level::info:
      return TRITONSERVER_LOG_INFO;
    default:
      return TRITONSERVER_LOG_VERBOSE;
  }
}

bool Enabled(spdlog::level::level_enum level) {
  if (level == spdlog::level::off) return false;
  return TRITONSERVER_LogIsEnabled(TritonLevel(level));
}

void Write(spdlog::level::level_enum level, const char* file, int line, std::string_view msg) {
  const std::string text(msg);
  TRITONSERVER_Error* err = TRITONSERVER_LogMessage(TritonLevel(level), file, line, text.c_str());
  // NOTE: nowhere else to report a failure to log; drop it rather than recurse.
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);
}

const LogSink kTritonSink{&Enabled, &Write};

}  // namespace

void UseTritonLog() {
  SetLogSink(&kTritonSink);
}

}  // namespace inflight::backend
