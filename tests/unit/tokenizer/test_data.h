// Where the tokenizer tests find the files tools/fetch_test_data.sh fetched.
#pragma once

#include <cstdlib>
#include <string>

namespace inflight::tokenizer::testing {

// $INFLIGHT_TEST_DATA, else <source>/.testdata (the fetch script's default).
inline std::string TestDataDir() {
  if (const char* dir = std::getenv("INFLIGHT_TEST_DATA"); dir != nullptr && *dir != '\0')
    return dir;
  const char* source = std::getenv("INFLIGHT_SOURCE_DIR");
  return std::string(source != nullptr ? source : ".") + "/.testdata";
}

inline std::string Gpt2Dir() {
  return TestDataDir() + "/gpt2";
}
inline std::string Llama3Dir() {
  return TestDataDir() + "/llama3";
}

}  // namespace inflight::tokenizer::testing
