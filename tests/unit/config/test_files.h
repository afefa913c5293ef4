// Paths of repository files for config tests (ctest sets INFLIGHT_SOURCE_DIR).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace inflight::config::testing {

inline std::filesystem::path SourceDir() {
  const char* dir = std::getenv("INFLIGHT_SOURCE_DIR");
  return dir != nullptr ? std::filesystem::path(dir)
                        : std::filesystem::path(INFLIGHT_SOURCE_DIR_DEFAULT);
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace inflight::config::testing
