// Logging through spdlog. One logger for the whole process; the host (inflight-server or the
// backend inside tritonserver) picks the level once at start-up.
#pragma once

#include <spdlog/spdlog.h>

namespace inflight {

// Verbosity as tritonserver's --log-verbose: 0 = info, >= 1 = debug, >= 2 = trace.
void SetLogVerbosity(int level);

}  // namespace inflight

#define LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
#define LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define LOG_TRACE(...) ::spdlog::trace(__VA_ARGS__)
