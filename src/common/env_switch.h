// A/B switches and tuning overrides read from the environment: what the benchmarks and device
// rounds set to compare two code paths; a serving deployment sets none of them. A caller keeps the
// value in a function-local static, so that a kernel launch does not scan the environment.
#pragma once

#include <cstdlib>

namespace inflight {

// A switch that is on unless `name`'s value starts with '0'.
inline bool EnvSwitchOn(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || v[0] != '0';
}

// A switch that is off unless `name`'s value starts with '1'.
inline bool EnvSwitchSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == '1';
}

// `name`'s value as an integer (atoll's reading), or `fallback` when it is unset.
inline long long EnvInteger(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoll(v) : fallback;
}

}  // namespace inflight
