#include "common/logging.h"

namespace inflight {

void SetLogVerbosity(int level) {
  spdlog::set_level(level >= 2   ? spdlog::level::trace
                    : level >= 1 ? spdlog::level::debug
                                 : spdlog::level::info);
}

}  // namespace inflight
