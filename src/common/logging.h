// Logging. By default through spdlog (inflight-server's own lines, tools, tests). A backend hosted
// by Triton installs a sink at TRITONBACKEND_Initialize (backend/triton_log.h) so that its lines go
// through TRITONSERVER_LogMessage and obey the host's --log-file / --log-info / --log-verbose,
// instead of spdlog's stdout.
//
// NOTE: the sink is process-wide state by nature, like spdlog's default logger. Each backend
// library links its own copy of this module with its symbols kept local (version scripts), so a
// backend's sink never redirects the host's own logging (inflight-server's TRITONSERVER_LogMessage
// writes through spdlog; it would otherwise call itself).
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>
#include <utility>

namespace inflight {

// Verbosity as tritonserver's --log-verbose: 0 = info, >= 1 = debug, >= 2 = trace.
void SetLogVerbosity(int level);

struct LogSink {
  // Whether a line of `level` would be written (checked before formatting it).
  bool (*enabled)(spdlog::level::level_enum level);
  void (*write)(spdlog::level::level_enum level, const char* file, int line, std::string_view msg);
};

// Sends every later line to `sink` (nullptr: back to spdlog). Set once at start-up, before other
// threads log.
void SetLogSink(const LogSink* sink);
const LogSink* CurrentLogSink();

template <typename... Args>
void LogLine(spdlog::level::level_enum level, const char* file, int line,
             spdlog::format_string_t<Args...> format, Args&&... args) {
  if (const LogSink* sink = CurrentLogSink()) {
    if (!sink->enabled(level)) return;
    sink->write(level, file, line, fmt::format(format, std::forward<Args>(args)...));
    return;
  }
  spdlog::log(level, format, std::forward<Args>(args)...);
}

}  // namespace inflight

#define INFLIGHT_LOG_AT(level, ...) ::inflight::LogLine(level, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_INFO(...) INFLIGHT_LOG_AT(::spdlog::level::info, __VA_ARGS__)
#define LOG_WARN(...) INFLIGHT_LOG_AT(::spdlog::level::warn, __VA_ARGS__)
#define LOG_ERROR(...) INFLIGHT_LOG_AT(::spdlog::level::err, __VA_ARGS__)
#define LOG_DEBUG(...) INFLIGHT_LOG_AT(::spdlog::level::debug, __VA_ARGS__)
#define LOG_TRACE(...) INFLIGHT_LOG_AT(::spdlog::level::trace, __VA_ARGS__)
