// Numbers as error messages show them: 0.9 not 0.900000, and nan / inf spelled out.
#pragma once

#include <cstdio>
#include <string>

namespace inflight::sampling {

inline std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace inflight::sampling
