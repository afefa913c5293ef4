// LOG_* lines go to spdlog unless a sink is installed; with a sink, each line reaches it once, with
// its level, file and line, and only when the sink says the level is enabled.
#include "common/logging.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace inflight {
namespace {

struct Captured {
  spdlog::level::level_enum level;
  std::string file;
  int line;
  std::string msg;
};

std::vector<Captured> g_lines;
spdlog::level::level_enum g_min_level = spdlog::level::info;
int g_enabled_calls = 0;

bool Enabled(spdlog::level::level_enum level) {
  ++g_enabled_calls;
  return level >= g_min_level;
}
void Write(spdlog::level::level_enum level, const char* file, int line, std::string_view msg) {
  g_lines.push_back({level, file, line, std::string(msg)});
}
const LogSink kSink{&Enabled, &Write};

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_lines.clear();
    g_enabled_calls = 0;
    g_min_level = spdlog::level::info;
    SetLogSink(&kSink);
  }
  void TearDown() override { SetLogSink(nullptr); }
};

TEST_F(LoggingTest, LinesReachTheSinkWithLevelFileAndLine) {
  const int line = __LINE__ + 1;
  LOG_WARN("model '{}': unknown parameter {}", "tensorrt_llm", 7);
  ASSERT_EQ(g_lines.size(), 1u);
  EXPECT_EQ(g_lines[0].level, spdlog::level::warn);
  EXPECT_NE(g_lines[0].file.find("logging_test.cc"), std::string::npos) << g_lines[0].file;
  EXPECT_EQ(g_lines[0].line, line);
  EXPECT_EQ(g_lines[0].msg, "model 'tensorrt_llm': unknown parameter 7");
}

TEST_F(LoggingTest, DisabledLevelsAreNotFormattedNorWritten) {
  g_min_level = spdlog::level::warn;  // as tritonserver --log-info=false
  LOG_INFO("info {}", 1);
  LOG_DEBUG("debug {}", 2);
  LOG_ERROR("error {}", 3);
  ASSERT_EQ(g_lines.size(), 1u);
  EXPECT_EQ(g_lines[0].level, spdlog::level::err);
  EXPECT_EQ(g_lines[0].msg, "error 3");
  EXPECT_EQ(g_enabled_calls, 3);
}

TEST_F(LoggingTest, WithoutASinkLinesGoToSpdlog) {
  SetLogSink(nullptr);
  EXPECT_EQ(CurrentLogSink(), nullptr);
  LOG_ERROR("to spdlog {}", 1);
  EXPECT_TRUE(g_lines.empty());
  EXPECT_EQ(g_enabled_calls, 0);
  SetLogSink(&kSink);
  EXPECT_EQ(CurrentLogSink(), &kSink);
}

}  // namespace
}  // namespace inflight
