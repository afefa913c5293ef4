// Requests through the core: validation messages, echo round trips, decoupled streaming,
// cancellation, queue limits, dynamic batching, execute errors and shutdown with work in flight.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "server/response_channel.h"
#include "test_server.h"

namespace inflight::server {
namespace {

using namespace std::chrono_literals;
using testing::BoolTensor;
using testing::BytesTensor;
using testing::BytesValues;
using testing::Collector;
using testing::FindOutput;
using testing::Fp32Tensor;
using testing::Int32Tensor;
using testing::Int32Values;

class ServerInfer : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::MakeServer(testing::TestOptions());
    ASSERT_NE(server_, nullptr);
  }
  Status InferError(InferRequest request) {
    Collector c;
    auto r = server_->Infer(std::move(request), c.Callback());
    EXPECT_FALSE(r.ok()) << "request was accepted";
    EXPECT_TRUE(c.Responses().empty()) << "a rejected request must not reach the callback";
    return r.status();
  }
  std::unique_ptr<Server> server_;
};

InferRequest EchoRequest(std::vector<int32_t> values) {
  InferRequest r;
  r.model_name = "echo";
  r.id = "req-1";
  r.inputs.push_back(Int32Tensor("IN0", values));
  return r;
}

TEST_F(ServerInfer, UnknownModelAndUnavailableModel) {
  InferRequest r = EchoRequest({1});
  r.model_name = "nope";
  Status st = InferError(r);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "Request for unknown model: 'nope' is not found");

  r.model_name = "unknown_backend";
  st = InferError(r);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("'unknown_backend'"), std::string::npos) << st.message();

  r.model_name = "echo";
  r.model_version = 7;
  st = InferError(r);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("version 7"), std::string::npos) << st.message();
}

TEST_F(ServerInfer, ValidationMessagesNameTheTensor) {
  InferRequest missing;
  missing.model_name = "echo";
  missing.inputs.push_back(BytesTensor("IN1", {"x"}));
  Status st = InferError(missing);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("missing required input(s) ['IN0']"), std::string::npos)
      << st.message();

  InferRequest unknown = EchoRequest({1});
  unknown.inputs.push_back(Int32Tensor("BOGUS", {1}));
  st = InferError(unknown);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("unexpected inference input 'BOGUS'"), std::string::npos)
      << st.message();

  InferRequest dtype;
  dtype.model_name = "echo";
  dtype.inputs.push_back(Fp32Tensor("IN0", {1.0f}, {1}));
  st = InferError(dtype);
  EXPECT_EQ(st.message(),
            "unexpected datatype TYPE_FP32 for inference input 'IN0', expecting TYPE_INT32");

  InferRequest shape;
  shape.model_name = "batched";
  shape.inputs.push_back(Fp32Tensor("IN0", {1, 2, 3}, {1, 3}));
  st = InferError(shape);
  EXPECT_EQ(st.message(),
            "unexpected shape for input 'IN0' for model 'batched'. Expected [-1,2], got [1,3]");

  InferRequest too_big;
  too_big.model_name = "batched";
  too_big.inputs.push_back(Fp32Tensor("IN0", std::vector<float>(18, 0.f), {9, 2}));
  st = InferError(too_big);
  EXPECT_EQ(st.message(), "inference request batch-size must be <= 8 for 'batched'");

  InferRequest no_batch_dim;
  no_batch_dim.model_name = "batched";
  no_batch_dim.inputs.push_back(Fp32Tensor("IN0", {1, 2}, {2}));
  st = InferError(no_batch_dim);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);

  InferRequest bytes_size = EchoRequest({1, 2});
  bytes_size.inputs[0].data.pop_back();
  st = InferError(bytes_size);
  EXPECT_NE(st.message().find("unexpected total byte size 7 for input 'IN0', expecting 8"),
            std::string::npos)
      << st.message();

  InferRequest bad_bytes = EchoRequest({1});
  Tensor text = BytesTensor("IN1", {"hello"});
  text.data[0] = 50;  // claims 50 bytes, holds 5
  bad_bytes.inputs.push_back(text);
  st = InferError(bad_bytes);
  EXPECT_NE(st.message().find("input 'IN1' BYTES data is malformed"), std::string::npos)
      << st.message();

  InferRequest wrong_count = EchoRequest({1});
  Tensor two = BytesTensor("IN1", {"a", "b"});
  two.shape = {3};
  wrong_count.inputs.push_back(two);
  st = InferError(wrong_count);
  EXPECT_NE(st.message().find("expected 3 string elements for inference input 'IN1', got 2"),
            std::string::npos)
      << st.message();

  InferRequest bad_output = EchoRequest({1});
  bad_output.requested_outputs = {"NOPE"};
  st = InferError(bad_output);
  EXPECT_NE(st.message().find("unexpected inference output 'NOPE'"), std::string::npos);
}

TEST_F(ServerInfer, EchoRoundTripWithBytesAndRequestedOutputs) {
  InferRequest r = EchoRequest({7, -3, 11});
  r.inputs.push_back(BytesTensor("IN1", {"hello", "", "wörld"}));
  Collector c;
  ASSERT_TRUE(server_->Infer(r, c.Callback()).ok());
  ASSERT_TRUE(c.WaitFinal());
  auto responses = c.Responses();
  ASSERT_EQ(responses.size(), 1u);
  const auto& resp = responses[0];
  EXPECT_TRUE(resp.is_final);
  EXPECT_FALSE(resp.error.has_value());
  EXPECT_EQ(resp.id, "req-1");
  EXPECT_EQ(resp.model_name, "echo");
  EXPECT_EQ(resp.model_version, 1);
  const Tensor* out0 = FindOutput(resp, "OUT_IN0");
  ASSERT_NE(out0, nullptr);
  EXPECT_EQ(Int32Values(*out0), (std::vector<int32_t>{7, -3, 11}));
  EXPECT_EQ(out0->shape, (std::vector<int64_t>{3}));
  const Tensor* out1 = FindOutput(resp, "OUT_IN1");
  ASSERT_NE(out1, nullptr);
  EXPECT_EQ(out1->datatype, TRITONSERVER_TYPE_BYTES);
  EXPECT_EQ(BytesValues(*out1), (std::vector<std::string>{"hello", "", "wörld"}));

  r.requested_outputs = {"OUT_IN1"};
  Collector only;
  ASSERT_TRUE(server_->Infer(r, only.Callback()).ok());
  ASSERT_TRUE(only.WaitFinal());
  auto filtered = only.Responses();
  ASSERT_EQ(filtered.size(), 1u);
  EXPECT_EQ(filtered[0].outputs.size(), 1u);
  EXPECT_NE(FindOutput(filtered[0], "OUT_IN1"), nullptr);
}

TEST_F(ServerInfer, BackendErrorResponseAndExecuteError) {
  InferRequest r = EchoRequest({1});
  r.inputs.push_back(BoolTensor("fail", true));
  Collector c;
  ASSERT_TRUE(server_->Infer(r, c.Callback()).ok());
  ASSERT_TRUE(c.WaitFinal());
  auto responses = c.Responses();
  ASSERT_EQ(responses.size(), 1u);
  ASSERT_TRUE(responses[0].error.has_value());
  EXPECT_EQ(responses[0].error->code(), StatusCode::kInvalidArgument);
  EXPECT_NE(responses[0].error->message().find("asked to fail"), std::string::npos);

  InferRequest e = EchoRequest({1});
  e.model_name = "exec_error";
  Collector ec;
  ASSERT_TRUE(server_->Infer(e, ec.Callback()).ok());
  ASSERT_TRUE(ec.WaitFinal());
  auto eresp = ec.Responses();
  ASSERT_EQ(eresp.size(), 1u);
  ASSERT_TRUE(eresp[0].error.has_value());
  EXPECT_EQ(eresp[0].error->code(), StatusCode::kInternal);
  EXPECT_NE(eresp[0].error->message().find("execute_error is set"), std::string::npos);
}

TEST_F(ServerInfer, DecoupledStreamsInOrderThenOneFinal) {
  InferRequest r;
  r.model_name = "stream";
  r.inputs.push_back(Int32Tensor("IN0", {42}));
  r.inputs.push_back(Int32Tensor("count", {5}, {1}));
  Collector c;
  ASSERT_TRUE(server_->Infer(r, c.Callback()).ok());
  ASSERT_TRUE(c.WaitFinal());
  std::this_thread::sleep_for(50ms);  // nothing may follow the final response
  auto responses = c.Responses();
  ASSERT_EQ(responses.size(), 6u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(responses[i].is_final) << i;
    const Tensor* index = FindOutput(responses[i], "INDEX");
    ASSERT_NE(index, nullptr) << i;
    EXPECT_EQ(Int32Values(*index), std::vector<int32_t>{i});
    EXPECT_EQ(Int32Values(*FindOutput(responses[i], "OUT_IN0")), std::vector<int32_t>{42});
  }
  EXPECT_TRUE(responses[5].is_final);
  EXPECT_TRUE(responses[5].outputs.empty());
  EXPECT_EQ(c.NumFinal(), 1);
}

TEST_F(ServerInfer, CancellationStopsAStreamEarly) {
  InferRequest r;
  r.model_name = "stream";
  r.inputs.push_back(Int32Tensor("IN0", {1}));
  r.inputs.push_back(Int32Tensor("count", {1000}, {1}));
  Collector c;
  auto handle = server_->Infer(r, c.Callback());
  ASSERT_TRUE(handle.ok());
  ASSERT_TRUE(c.WaitCount(2));
  handle.value()->Cancel();
  ASSERT_TRUE(c.WaitFinal(3s)) << "a cancelled stream must still end with FINAL";
  auto responses = c.Responses();
  EXPECT_LT(responses.size(), 100u);
  EXPECT_TRUE(responses.back().is_final);
  EXPECT_EQ(c.NumFinal(), 1);
}

TEST_F(ServerInfer, FullQueueRejectsWithTritonMessage) {
  std::vector<Collector> collectors(5);
  std::vector<bool> accepted;
  for (auto& c : collectors) {
    InferRequest r;
    r.model_name = "slow_queue";
    r.inputs.push_back(Int32Tensor("IN0", {3}, {1, 1}));
    auto result = server_->Infer(r, c.Callback());
    accepted.push_back(result.ok());
    if (!result.ok()) {
      EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
      EXPECT_EQ(result.status().message(), "Exceeds maximum queue size");
    }
  }
  // One executing (300 ms) plus one queued at most: at least 3 of 5 rapid requests are refused.
  const auto num_accepted = std::count(accepted.begin(), accepted.end(), true);
  EXPECT_LE(num_accepted, 2);
  EXPECT_GE(num_accepted, 1);
  for (size_t i = 0; i < collectors.size(); ++i) {
    if (!accepted[i]) continue;
    ASSERT_TRUE(collectors[i].WaitFinal(3s)) << "accepted request " << i << " was not answered";
    auto responses = collectors[i].Responses();
    ASSERT_EQ(responses.size(), 1u);
    EXPECT_FALSE(responses[0].error.has_value());
  }
}

TEST_F(ServerInfer, DynamicBatchingGathersRequests) {
  std::vector<Collector> collectors(4);
  for (size_t i = 0; i < collectors.size(); ++i) {
    InferRequest r;
    r.model_name = "batched";
    r.inputs.push_back(Fp32Tensor("IN0", {float(i), float(i) + 0.5f}, {1, 2}));
    ASSERT_TRUE(server_->Infer(r, collectors[i].Callback()).ok());
  }
  int32_t max_batch = 0;
  for (size_t i = 0; i < collectors.size(); ++i) {
    ASSERT_TRUE(collectors[i].WaitFinal());
    auto resp = collectors[i].Responses().at(0);
    ASSERT_FALSE(resp.error.has_value()) << resp.error->message();
    const Tensor* out = FindOutput(resp, "OUT_IN0");
    ASSERT_NE(out, nullptr);
    float v[2];
    std::memcpy(v, out->data.data(), 8);
    EXPECT_EQ(v[0], float(i));
    EXPECT_EQ(v[1], float(i) + 0.5f);
    max_batch = std::max(max_batch, Int32Values(*FindOutput(resp, "BATCH_REQUESTS"))[0]);
  }
  EXPECT_GE(max_batch, 2) << "requests sent together within the queue delay share an Execute";
}

TEST_F(ServerInfer, RequestReleasedWithoutAnyResponseIsAnsweredAtOnce) {
  InferRequest drop = EchoRequest({1});
  drop.inputs.push_back(BoolTensor("drop", true));
  Collector c;
  ASSERT_TRUE(server_->Infer(drop, c.Callback()).ok());
  ASSERT_TRUE(c.WaitFinal(2s));
  auto responses = c.Responses();
  ASSERT_EQ(responses.size(), 1u);
  ASSERT_TRUE(responses[0].error.has_value());
  EXPECT_EQ(responses[0].error->code(), StatusCode::kInternal);
  EXPECT_NE(responses[0].error->message().find("without sending a final response"),
            std::string::npos);
}

TEST(ServerShutdown, CancelsStreamsAndAnswersAbandonedRequests) {
  auto options = testing::TestOptions();
  options.exit_timeout_secs = 0.3;
  auto server = testing::MakeServer(options);
  ASSERT_NE(server, nullptr);
  InferRequest stream;
  stream.model_name = "stream";
  stream.inputs.push_back(Int32Tensor("IN0", {1}));
  stream.inputs.push_back(Int32Tensor("count", {100000}, {1}));
  Collector sc;
  ASSERT_TRUE(server->Infer(stream, sc.Callback()).ok());

  InferRequest hang = EchoRequest({1});
  hang.inputs.push_back(BoolTensor("hang", true));
  Collector hc;
  ASSERT_TRUE(server->Infer(hang, hc.Callback()).ok());
  ASSERT_TRUE(sc.WaitCount(1));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(hc.Responses().size(), 0u) << "the backend holds the hung request";

  const auto start = std::chrono::steady_clock::now();
  server->Shutdown();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 3s);
  EXPECT_FALSE(server->IsLive());
  EXPECT_FALSE(server->IsReady());

  // The stream saw the cancellation and ended with FINAL; the hung request got an error.
  ASSERT_TRUE(sc.WaitFinal(1s));
  EXPECT_EQ(sc.NumFinal(), 1);
  EXPECT_FALSE(sc.Responses().back().error.has_value());
  ASSERT_TRUE(hc.WaitFinal(1s)) << "a request the backend never answered is answered at shutdown";
  auto hr = hc.Responses();
  ASSERT_EQ(hr.size(), 1u);
  ASSERT_TRUE(hr[0].error.has_value());

  auto after = server->Infer(EchoRequest({1}), Collector().Callback());
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
}

// The channel enforces Triton's response rules that a backend could break.
TEST(ResponseChannelRules, NonDecoupledAnswersOnceAndFinalComesOnce) {
  Collector c;
  ChannelInfo info;
  info.model_name = "m";
  info.request_id = "r";
  auto channel = ResponseChannel::Create(info, c.Callback(), nullptr);
  EXPECT_TRUE(channel->Send({}, {}, 0, std::nullopt).ok());
  EXPECT_TRUE(c.Responses().empty()) << "held until FINAL";
  Status second = channel->Send({}, {}, TRITONSERVER_RESPONSE_COMPLETE_FINAL, std::nullopt);
  EXPECT_EQ(second.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(second.message().find("not decoupled"), std::string::npos);
  EXPECT_TRUE(channel->SendFlags(TRITONSERVER_RESPONSE_COMPLETE_FINAL).ok());
  EXPECT_EQ(c.Responses().size(), 1u);
  EXPECT_TRUE(c.Responses()[0].is_final);
  EXPECT_FALSE(channel->SendFlags(TRITONSERVER_RESPONSE_COMPLETE_FINAL).ok());
  EXPECT_FALSE(channel->Fail(Internal("late")));
  EXPECT_EQ(c.Responses().size(), 1u);
  EXPECT_FALSE(channel->SendFlags(0).ok());
}

TEST(ResponseChannelRules, DecoupledSendsAfterFinalAreErrors) {
  Collector c;
  ChannelInfo info;
  info.model_name = "m";
  info.decoupled = true;
  auto channel = ResponseChannel::Create(info, c.Callback(), nullptr);
  EXPECT_TRUE(channel->Send({}, {}, 0, std::nullopt).ok());
  EXPECT_TRUE(channel->Send({}, {}, 0, std::nullopt).ok());
  EXPECT_TRUE(channel->Send({}, {}, TRITONSERVER_RESPONSE_COMPLETE_FINAL, std::nullopt).ok());
  EXPECT_EQ(channel->Send({}, {}, 0, std::nullopt).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.Responses().size(), 3u);
  EXPECT_EQ(c.NumFinal(), 1);
}

}  // namespace
}  // namespace inflight::server
