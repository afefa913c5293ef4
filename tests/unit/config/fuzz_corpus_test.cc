// Runs the config fuzzers' checks over the seed corpus and the repository templates, so every CI
// build exercises them without clang. Files named *.filled.* must load.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "config_fuzz_checks.h"
#include "unit/config/test_files.h"

namespace inflight::config {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::SourceDir;

std::vector<fs::path> CorpusFiles() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(SourceDir() / "tests" / "fuzz" / "corpus")) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  for (const auto& entry :
       fs::directory_iterator(SourceDir() / "all_models" / "inflight_batcher_llm")) {
    if (fs::exists(entry.path() / "config.pbtxt")) files.push_back(entry.path() / "config.pbtxt");
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(FuzzCorpusTest, CorpusIsNotEmpty) {
  size_t filled = 0;
  for (const auto& path : CorpusFiles()) {
    filled += path.filename().string().find(".filled.") != std::string::npos ? 1 : 0;
  }
  EXPECT_GE(filled, 5u);
}

TEST(FuzzCorpusTest, LoadersKeepTheirInvariantsOnEveryCorpusFile) {
  for (const auto& path : CorpusFiles()) {
    SCOPED_TRACE(path.string());
    const std::string data = ReadFile(path);
    const bool must_load = path.filename().string().find(".filled.") != std::string::npos;
    bool text_ok = false, json_ok = false;
    EXPECT_EQ(fuzz::CheckText(data, &text_ok), "");
    EXPECT_EQ(fuzz::CheckJson(data, &json_ok), "");
    if (must_load && path.extension() == ".pbtxt") {
      EXPECT_TRUE(text_ok);
    }
    if (must_load && path.extension() == ".json") {
      EXPECT_TRUE(json_ok);
    }
  }
}

}  // namespace
}  // namespace inflight::config
