// Ensembles: plain two-step echo, optional inputs, a streaming step, and step errors.
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_server.h"

namespace inflight::server {
namespace {

using namespace std::chrono_literals;
using testing::BoolTensor;
using testing::BytesTensor;
using testing::BytesValues;
using testing::Collector;
using testing::FindOutput;
using testing::Int32Tensor;
using testing::Int32Values;

class ServerEnsemble : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::MakeServer(testing::TestOptions());
    ASSERT_NE(server_, nullptr);
  }
  std::unique_ptr<Server> server_;
};

TEST_F(ServerEnsemble, TwoEchoStepsAndOptionalInput) {
  InferRequest r;
  r.model_name = "ensemble_echo";
  r.id = "ens-1";
  r.inputs.push_back(Int32Tensor("INPUT", {4, 5, 6}));
  Collector c;
  ASSERT_TRUE(server_->Infer(r, c.Callback()).ok());
  ASSERT_TRUE(c.WaitFinal());
  auto responses = c.Responses();
  ASSERT_EQ(responses.size(), 1u);
  ASSERT_FALSE(responses[0].error.has_value()) << responses[0].error->message();
  EXPECT_TRUE(responses[0].is_final);
  EXPECT_EQ(responses[0].id, "ens-1");
  EXPECT_EQ(responses[0].model_name, "ensemble_echo");
  const Tensor* out = FindOutput(responses[0], "OUTPUT");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(Int32Values(*out), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(FindOutput(responses[0], "TEXT_OUT"), nullptr)
      << "TEXT was not given, so the step got no IN1 and produced no TEXT_OUT";
  EXPECT_EQ(FindOutput(responses[0], "mid"), nullptr) << "internal tensors stay internal";

  r.inputs.push_back(BytesTensor("TEXT", {"abc", "de"}));
  Collector with_text;
  ASSERT_TRUE(server_->Infer(r, with_text.Callback()).ok());
  ASSERT_TRUE(with_text.WaitFinal());
  auto resp = with_text.Responses().at(0);
  const Tensor* text = FindOutput(resp, "TEXT_OUT");
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(BytesValues(*text), (std::vector<std::string>{"abc", "de"}));
}

TEST_F(ServerEnsemble, StreamingStepMakesTheEnsembleStream) {
  InferRequest r;
  r.model_name = "ensemble_stream";
  r.inputs.push_back(Int32Tensor("INPUT", {9, 8}));
  r.inputs.push_back(Int32Tensor("COUNT", {4}, {1}));
  Collector c;
  ASSERT_TRUE(server_->Infer(r, c.Callback()).ok());
  ASSERT_TRUE(c.WaitFinal());
  std::this_thread::sleep_for(50ms);
  auto responses = c.Responses();
  ASSERT_EQ(responses.size(), 5u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_FALSE(responses[i].error.has_value()) << responses[i].error->message();
    EXPECT_FALSE(responses[i].is_final);
    const Tensor* index = FindOutput(responses[i], "INDEX");
    const Tensor* out = FindOutput(responses[i], "OUTPUT");
    ASSERT_NE(index, nullptr);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(Int32Values(*index), std::vector<int32_t>{i});
    EXPECT_EQ(Int32Values(*out), (std::vector<int32_t>{9, 8}));
  }
  EXPECT_TRUE(responses[4].is_final);
  EXPECT_EQ(c.NumFinal(), 1);
}

TEST_F(ServerEnsemble, StepErrorFailsTheEnsembleOnce) {
  InferRequest r;
  r.model_name = "ensemble_stream";
  r.inputs.push_back(Int32Tensor("INPUT", {1}));
  r.inputs.push_back(BoolTensor("FAIL", true));
  Collector c;
  ASSERT_TRUE(server_->Infer(r, c.Callback()).ok());
  ASSERT_TRUE(c.WaitFinal());
  std::this_thread::sleep_for(50ms);
  auto responses = c.Responses();
  ASSERT_EQ(responses.size(), 1u);
  ASSERT_TRUE(responses[0].error.has_value());
  EXPECT_EQ(responses[0].error->code(), StatusCode::kInvalidArgument);
  EXPECT_NE(responses[0].error->message().find("asked to fail"), std::string::npos)
      << responses[0].error->message();
  EXPECT_NE(responses[0].error->message().find("stream"), std::string::npos);
}

TEST_F(ServerEnsemble, ValidatesAgainstTheEnsembleConfigAndCountsStatistics) {
  InferRequest missing;
  missing.model_name = "ensemble_echo";
  missing.inputs.push_back(BytesTensor("TEXT", {"x"}));
  auto rejected = server_->Infer(missing, Collector().Callback());
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("['INPUT']"), std::string::npos);

  for (int i = 0; i < 3; ++i) {
    InferRequest r;
    r.model_name = "ensemble_echo";
    r.inputs.push_back(Int32Tensor("INPUT", {i}));
    Collector c;
    ASSERT_TRUE(server_->Infer(r, c.Callback()).ok());
    ASSERT_TRUE(c.WaitFinal());
  }
  // The backend reports statistics just after it answers: give the last report a moment.
  for (int i = 0; i < 1000; ++i) {
    auto echo = nlohmann::json::parse(server_->ModelStatisticsJson("echo").value());
    if (echo["model_stats"][0]["inference_stats"]["success"]["count"] == 6) break;
    std::this_thread::sleep_for(5ms);
  }
  auto json = server_->ModelStatisticsJson("ensemble_echo");
  ASSERT_TRUE(json.ok());
  auto stats = nlohmann::json::parse(*json);
  EXPECT_EQ(stats["model_stats"][0]["inference_stats"]["success"]["count"], 3);
  EXPECT_EQ(stats["model_stats"][0]["inference_stats"]["fail"]["count"], 1);
  // Each ensemble request ran echo twice.
  auto echo = nlohmann::json::parse(server_->ModelStatisticsJson("echo").value());
  EXPECT_EQ(echo["model_stats"][0]["inference_stats"]["success"]["count"], 6);
}

}  // namespace
}  // namespace inflight::server
