#include "common/logging.h"

#include <atomic>

namespace inflight {
namespace {

std::atomic<const LogSink*> g_sink{nullptr};

}  // namespace

void SetLogVerbosity(int level) {
  spdlog::set_level(level >= 2   ? spdlog::level::trace
                    : level >= 1 ? spdlog::level::debug
                                 : spdlog::level::info);
}

void SetLogSink(const LogSink* sink) {
  g_sink.store(sink, std::memory_order_release);
}

const LogSink* CurrentLogSink() {
  return g_sink.load(std::memory_order_acquire);
}

}  // namespace inflight
