// The OpenAI chat routes' context limit for each kind of engine_dir: our engine, TensorRT-LLM's,
// and a Hugging Face folder converted at load (found by review: chat answers were cut at 16 tokens
// there, because only engine configs were read).
#include "server/openai/engine_max_seq_len.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace inflight::server::openai {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class EngineMaxSeqLenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("engine_max_seq_len_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const json& config) {
    std::ofstream(dir_ / "config.json") << config.dump();
    return dir_.string();
  }
  static json WithBuildMaxSeqLen(const std::string& value) {
    return {{"parameters", {{"build_max_seq_len", {{"string_value", value}}}}}};
  }
  fs::path dir_;
};

TEST_F(EngineMaxSeqLenTest, EngineConfigsGiveTheirBuildLimit) {
  EXPECT_EQ(EngineMaxSeqLen(Write({{"build", {{"max_seq_len", 777}}}}), json::object()), 777);
  EXPECT_EQ(EngineMaxSeqLen(Write({{"build_config", {{"max_seq_len", 4096}}}}), json::object()),
            4096);
  // An engine's own limit wins over a build parameter, which only applies to conversions.
  EXPECT_EQ(EngineMaxSeqLen(Write({{"build", {{"max_seq_len", 777}}}}), WithBuildMaxSeqLen("64")),
            777);
}

TEST_F(EngineMaxSeqLenTest, HuggingFaceFoldersGiveTheBuildersDefault) {
  // Llama-3's 131072 positions are capped at the builder's 2048; a small model keeps its own.
  EXPECT_EQ(EngineMaxSeqLen(Write({{"model_type", "llama"}, {"max_position_embeddings", 131072}}),
                            json::object()),
            2048);
  EXPECT_EQ(EngineMaxSeqLen(Write({{"model_type", "llama"}, {"max_position_embeddings", 256}}),
                            json::object()),
            256);
  EXPECT_EQ(EngineMaxSeqLen(Write({{"model_type", "gpt2"}, {"n_positions", 1024}}), json::object()),
            1024);
  EXPECT_EQ(EngineMaxSeqLen(Write({{"model_type", "llama"}, {"max_position_embeddings", 131072}}),
                            WithBuildMaxSeqLen("8192")),
            8192);
  // A value the backend refuses at load says nothing here.
  EXPECT_EQ(EngineMaxSeqLen(Write({{"model_type", "llama"}, {"max_position_embeddings", 512}}),
                            WithBuildMaxSeqLen("8k")),
            512);
}

TEST_F(EngineMaxSeqLenTest, NothingKnownIsNullopt) {
  EXPECT_EQ(EngineMaxSeqLen((dir_ / "missing").string(), json::object()), std::nullopt);
  EXPECT_EQ(EngineMaxSeqLen(Write({{"model_type", "llama"}}), json::object()), std::nullopt);
  std::ofstream(dir_ / "config.json") << "{not json";
  EXPECT_EQ(EngineMaxSeqLen(dir_.string(), json::object()), std::nullopt);
}

}  // namespace
}  // namespace inflight::server::openai
