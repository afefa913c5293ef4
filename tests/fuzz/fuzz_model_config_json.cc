// libFuzzer target: Triton's model config JSON -> ModelConfig -> JSON -> ModelConfig, and
// LlmParams.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "config_fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string problem = inflight::config::fuzz::CheckJson(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!problem.empty()) {
    std::fprintf(stderr, "%s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
