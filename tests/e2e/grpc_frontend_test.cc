// The gRPC frontend over real loopback gRPC with the generated C++ client, against FakeServer
// instead of the core: every RPC, raw and typed tensor contents, status codes and messages, stream
// ordering and errors, triton_final_response, cancellation by the client and at shutdown.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <tuple>

#include "e2e/fake_server.h"
#include "grpc_service.grpc.pb.h"
#include "server/grpc/grpc_service.h"
#include "server/grpc/grpc_tensors.h"

namespace inflight::server::grpc_frontend {
namespace {

using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;
using testing::FakeServer;
using ::testing::HasSubstr;

std::string Int32s(std::initializer_list<std::int32_t> values) {
  std::string out;
  for (std::int32_t v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

std::string Strings(std::initializer_list<std::string> values) {
  std::string out;
  for (const std::string& v : values) {
    const auto len = static_cast<std::uint32_t>(v.size());
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += v;
  }
  return out;
}

std::int32_t FirstInt32(const std::string& raw) {
  std::int32_t v = -1;
  if (raw.size() >= 4) std::memcpy(&v, raw.data(), 4);
  return v;
}

ModelInferRequest::InferInputTensor* AddInput(ModelInferRequest& r, const std::string& name,
                                              const std::string& datatype,
                                              std::initializer_list<std::int64_t> shape) {
  auto* in = r.add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (std::int64_t d : shape) in->add_shape(d);
  return in;
}

// A request to the fake "stream" model: COUNT responses, DELAY_MS apart, an error at FAIL_AT.
ModelInferRequest StreamRequest(const std::string& id, int count, int delay_ms = 0,
                                int fail_at = -1) {
  ModelInferRequest r;
  r.set_model_name("stream");
  r.set_id(id);
  AddInput(r, "COUNT", "INT32", {1, 1});
  r.add_raw_input_contents(Int32s({count}));
  AddInput(r, "DELAY_MS", "INT32", {1, 1});
  r.add_raw_input_contents(Int32s({delay_ms}));
  if (fail_at >= 0) {
    AddInput(r, "FAIL_AT", "INT32", {1, 1});
    r.add_raw_input_contents(Int32s({fail_at}));
  }
  return r;
}

class GrpcFrontendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GrpcServiceOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    service_ = std::make_unique<GrpcService>(fake_, options);
    ASSERT_TRUE(service_->Start().ok());
    ASSERT_GT(service_->port(), 0);
    channel_ = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(service_->port()),
                                     ::grpc::InsecureChannelCredentials());
    stub_ = GRPCInferenceService::NewStub(channel_);
  }
  void TearDown() override {
    service_->Stop(std::chrono::milliseconds(100));
    fake_.Shutdown();
  }

  // Runs ModelInfer; the status goes to `status`.
  ModelInferResponse Infer(const ModelInferRequest& request, ::grpc::Status* status) {
    ::grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ModelInferResponse response;
    *status = stub_->ModelInfer(&context, request, &response);
    return response;
  }
  // The status of a ModelInfer that must fail with `code`.
  std::string InferError(const ModelInferRequest& request, ::grpc::StatusCode code) {
    ::grpc::Status status;
    Infer(request, &status);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    return status.error_message();
  }

  // Writes `requests` on one stream, half-closes, and reads every message until the stream ends.
  std::vector<ModelStreamInferResponse> StreamAll(const std::vector<ModelInferRequest>& requests,
                                                  ::grpc::Status* status) {
    ::grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stream = stub_->ModelStreamInfer(&context);
    for (const auto& r : requests) EXPECT_TRUE(stream->Write(r));
    stream->WritesDone();
    std::vector<ModelStreamInferResponse> out;
    ModelStreamInferResponse message;
    while (stream->Read(&message)) out.push_back(message);
    *status = stream->Finish();
    return out;
  }

  void WaitForCancelled(int n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (fake_.cancelled_requests() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(fake_.cancelled_requests(), n);
  }

  FakeServer fake_;
  std::unique_ptr<GrpcService> service_;
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

TEST_F(GrpcFrontendTest, HealthMetadataConfigStatisticsAndIndex) {
  {
    ::grpc::ClientContext c;
    inference::ServerLiveResponse live;
    ASSERT_TRUE(stub_->ServerLive(&c, {}, &live).ok());
    EXPECT_TRUE(live.live());
  }
  {
    ::grpc::ClientContext c;
    inference::ServerMetadataResponse md;
    ASSERT_TRUE(stub_->ServerMetadata(&c, {}, &md).ok());
    EXPECT_EQ(md.name(), "inflight");
    EXPECT_FALSE(md.version().empty());
  }
  {
    ::grpc::ClientContext c;
    inference::ModelMetadataRequest req;
    req.set_name("stream");
    inference::ModelMetadataResponse md;
    ASSERT_TRUE(stub_->ModelMetadata(&c, req, &md).ok());
    ASSERT_EQ(md.inputs_size(), 3);
    EXPECT_EQ(md.inputs(0).name(), "COUNT");
    EXPECT_EQ(md.inputs(0).datatype(), "INT32");
    EXPECT_EQ(md.inputs(0).shape(0), -1);
    EXPECT_EQ(md.versions(0), "1");
  }
  for (const auto& [name, version, ready] : std::vector<std::tuple<std::string, std::string, bool>>{
           {"echo", "", true}, {"echo", "1", true}, {"echo", "2", false}, {"nope", "", false}}) {
    ::grpc::ClientContext c;
    inference::ModelReadyRequest req;
    req.set_name(name);
    req.set_version(version);
    inference::ModelReadyResponse res;
    ASSERT_TRUE(stub_->ModelReady(&c, req, &res).ok());
    EXPECT_EQ(res.ready(), ready) << name << " version '" << version << "'";
  }
  {
    ::grpc::ClientContext c;
    inference::ModelReadyRequest req;
    req.set_name("echo");
    req.set_version("v1");
    inference::ModelReadyResponse res;
    auto st = stub_->ModelReady(&c, req, &res);
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr("version \"v1\" is not a non-negative integer"));
  }
  {
    ::grpc::ClientContext c;
    inference::ModelConfigRequest req;
    req.set_name("stream");
    inference::ModelConfigResponse res;
    ASSERT_TRUE(stub_->ModelConfig(&c, req, &res).ok());
    EXPECT_EQ(res.config().name(), "stream");
    EXPECT_EQ(res.config().max_batch_size(), 4);
  }
  {
    ::grpc::ClientContext c;
    inference::ModelStatisticsRequest req;
    req.set_name("echo");
    inference::ModelStatisticsResponse res;
    ASSERT_TRUE(stub_->ModelStatistics(&c, req, &res).ok());
    ASSERT_EQ(res.model_stats_size(), 1);
    EXPECT_EQ(res.model_stats(0).name(), "echo");
  }
  {
    ::grpc::ClientContext c;
    inference::RepositoryIndexRequest req;
    inference::RepositoryIndexResponse all;
    ASSERT_TRUE(stub_->RepositoryIndex(&c, req, &all).ok());
    EXPECT_EQ(all.models_size(), 4);
    ::grpc::ClientContext c2;
    req.set_ready(true);
    inference::RepositoryIndexResponse ready;
    ASSERT_TRUE(stub_->RepositoryIndex(&c2, req, &ready).ok());
    EXPECT_EQ(ready.models_size(), 3);
    for (const auto& m : ready.models()) EXPECT_EQ(m.state(), "READY") << m.name();
    ::grpc::ClientContext c3;
    req.set_repository_name("models");
    auto st = stub_->RepositoryIndex(&c3, req, &ready);
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(st.error_message(), HasSubstr("repository_name \"models\""));
  }
}

TEST_F(GrpcFrontendTest, WhatIsNotServedIsRefusedByName) {
  {
    ::grpc::ClientContext c;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("echo");
    inference::RepositoryModelLoadResponse res;
    auto st = stub_->RepositoryModelLoad(&c, req, &res);
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(st.error_message(), HasSubstr("explicit model load of 'echo' is not allowed"));
  }
  {
    ::grpc::ClientContext c;
    inference::SystemSharedMemoryRegisterRequest req;
    inference::SystemSharedMemoryRegisterResponse res;
    auto st = stub_->SystemSharedMemoryRegister(&c, req, &res);
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(st.error_message(), HasSubstr("system shared memory is not supported"));
  }
  {
    ::grpc::ClientContext c;
    inference::ModelStatisticsRequest req;
    req.set_name("nope");
    inference::ModelStatisticsResponse res;
    EXPECT_EQ(stub_->ModelStatistics(&c, req, &res).error_code(), ::grpc::StatusCode::NOT_FOUND);
  }
}

TEST_F(GrpcFrontendTest, InferWithRawContentsAsTritonclientSendsThem) {
  ModelInferRequest r;
  r.set_model_name("echo");
  r.set_model_version("1");
  r.set_id("req-7");
  AddInput(r, "INPUT0", "INT32", {3});
  r.add_raw_input_contents(Int32s({-5, 0, 2147483647}));
  AddInput(r, "TEXT", "BYTES", {2});
  r.add_raw_input_contents(Strings({"héllo", std::string("\0zero", 5)}));
  AddInput(r, "F16_IN", "FP16", {2});
  r.add_raw_input_contents(std::string("\x00\x3c\x00\xc0", 4));  // 1.0, -2.0
  (*r.mutable_parameters())["Streaming"].set_bool_param(false);
  (*r.mutable_parameters())["priority"].set_uint64_param(3);
  (*r.mutable_parameters())["temperature"].set_double_param(0.5);
  (*r.mutable_parameters())["note"].set_string_param("x");
  r.add_outputs()->set_name("OUTPUT0");
  r.add_outputs()->set_name("TEXT_OUT");

  ::grpc::Status status;
  ModelInferResponse res = Infer(r, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(res.model_name(), "echo");
  EXPECT_EQ(res.model_version(), "1");
  EXPECT_EQ(res.id(), "req-7");
  ASSERT_EQ(res.outputs_size(), 3);
  ASSERT_EQ(res.raw_output_contents_size(), 3);
  EXPECT_EQ(res.outputs(0).name(), "OUTPUT0");
  EXPECT_EQ(res.outputs(0).datatype(), "INT32");
  EXPECT_EQ(res.outputs(0).shape(0), 3);
  EXPECT_EQ(res.raw_output_contents(0), Int32s({-5, 0, 2147483647}));
  EXPECT_EQ(res.outputs(1).datatype(), "BYTES");
  EXPECT_EQ(res.raw_output_contents(1), Strings({"héllo", std::string("\0zero", 5)}));
  EXPECT_EQ(res.outputs(2).datatype(), "FP16");
  EXPECT_EQ(res.raw_output_contents(2), std::string("\x00\x3c\x00\xc0", 4));
  // Parameters reach the core with their types (uint64 as int64) and come back.
  EXPECT_FALSE(res.parameters().at("Streaming").bool_param());
  EXPECT_EQ(res.parameters().at("priority").int64_param(), 3);
  EXPECT_EQ(res.parameters().at("temperature").double_param(), 0.5);
  EXPECT_EQ(res.parameters().at("note").string_param(), "x");
  const InferRequest seen = fake_.last_request();
  EXPECT_EQ(seen.model_version, 1);
  EXPECT_EQ(seen.requested_outputs, (std::vector<std::string>{"OUTPUT0", "TEXT_OUT"}));
}

TEST_F(GrpcFrontendTest, InferWithTypedContents) {
  ModelInferRequest r;
  r.set_model_name("echo");
  auto* in = AddInput(r, "INPUT0", "INT32", {2, 2});
  for (int v : {1, -2, 3, -4}) in->mutable_contents()->add_int_contents(v);
  auto* text = AddInput(r, "TEXT", "BYTES", {1});
  text->mutable_contents()->add_bytes_contents("typed");
  ::grpc::Status status;
  ModelInferResponse res = Infer(r, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(res.raw_output_contents(0), Int32s({1, -2, 3, -4}));
  EXPECT_EQ(res.raw_output_contents(1), Strings({"typed"}));
  const InferRequest seen = fake_.last_request();
  ASSERT_EQ(seen.inputs.size(), 2u);
  EXPECT_EQ(seen.inputs[0].shape, (std::vector<std::int64_t>{2, 2}));
}

TEST_F(GrpcFrontendTest, MalformedTensorsAreInvalidArgumentNamingFieldAndValue) {
  struct Case {
    std::function<void(ModelInferRequest&)> build;
    ::grpc::StatusCode code;
    std::string text;
  };
  const std::vector<Case> cases = {
      {[](ModelInferRequest& r) {
         AddInput(r, "INPUT0", "INT32", {3});
         r.add_raw_input_contents(Int32s({1, 2}));
       },
       ::grpc::StatusCode::INVALID_ARGUMENT,
       "inputs[0] \"INPUT0\": shape [3] of INT32 needs 12 bytes but its raw_input_contents holds "
       "8"},
      {[](ModelInferRequest& r) {
         AddInput(r, "INPUT0", "INT32", {1});
         AddInput(r, "TEXT", "BYTES", {1});
         r.add_raw_input_contents(Int32s({1}));
       },
       ::grpc::StatusCode::INVALID_ARGUMENT, "raw_input_contents has 1 entries but inputs has 2"},
      {[](ModelInferRequest& r) {
         AddInput(r, "TEXT", "BYTES", {2});
         r.add_raw_input_contents(Strings({"a"}) + std::string("\x09\x00", 2));
       },
       ::grpc::StatusCode::INVALID_ARGUMENT,
       "BYTES element 1 has a truncated 4-byte length prefix"},
      {[](ModelInferRequest& r) {
         AddInput(r, "TEXT", "BYTES", {1});
         r.add_raw_input_contents(
             std::string("\x10\x00\x00\x00"
                         "abc",
                         7));
       },
       ::grpc::StatusCode::INVALID_ARGUMENT, "BYTES element 0 claims 16 bytes but only 3 remain"},
      {[](ModelInferRequest& r) {
         AddInput(r, "INPUT0", "INT33", {1});
         r.add_raw_input_contents(Int32s({1}));
       },
       ::grpc::StatusCode::INVALID_ARGUMENT, "datatype \"INT33\" is not one of: BOOL"},
      {[](ModelInferRequest& r) {
         AddInput(r, "INPUT0", "INT8", {1})->mutable_contents()->add_int_contents(300);
       },
       ::grpc::StatusCode::INVALID_ARGUMENT,
       "inputs[0] \"INPUT0\": contents.int_contents[0] = 300 does not fit in INT8"},
      {[](ModelInferRequest& r) {
         AddInput(r, "INPUT0", "INT32", {1})->mutable_contents()->add_int64_contents(1);
       },
       ::grpc::StatusCode::INVALID_ARGUMENT,
       "datatype INT32 takes its elements in contents.int_contents, not contents.int64_contents"},
      {[](ModelInferRequest& r) {
         AddInput(r, "INPUT0", "INT32", {2})->mutable_contents()->add_int_contents(1);
       },
       ::grpc::StatusCode::INVALID_ARGUMENT, "shape [2] needs 2 elements but its contents hold 1"},
      {[](ModelInferRequest& r) {
         AddInput(r, "F16_IN", "FP16", {1})->mutable_contents()->add_fp32_contents(1.0f);
       },
       ::grpc::StatusCode::INVALID_ARGUMENT, "FP16 has no typed contents field"},
      {[](ModelInferRequest& r) {
         AddInput(r, "INPUT0", "INT32", {1})->mutable_contents()->add_int_contents(1);
         AddInput(r, "TEXT", "BYTES", {1});
         r.add_raw_input_contents(Int32s({1}));
         r.add_raw_input_contents(Strings({"x"}));
       },
       ::grpc::StatusCode::INVALID_ARGUMENT, "has both contents and raw_input_contents"},
      {[](ModelInferRequest& r) {
         auto* in = AddInput(r, "INPUT0", "INT32", {1});
         (*in->mutable_parameters())["shared_memory_region"].set_string_param("r0");
         r.add_raw_input_contents(Int32s({1}));
       },
       ::grpc::StatusCode::UNIMPLEMENTED,
       "parameter 'shared_memory_region' asks for shared memory"},
      {[](ModelInferRequest& r) {
         AddInput(r, "INPUT0", "INT32", {1});
         r.add_raw_input_contents(Int32s({1}));
         auto* out = r.add_outputs();
         out->set_name("OUTPUT0");
         (*out->mutable_parameters())["classification"].set_int64_param(3);
       },
       ::grpc::StatusCode::UNIMPLEMENTED, "\"OUTPUT0\": parameter 'classification'"},
      {[](ModelInferRequest& r) {
         AddInput(r, "INPUT0", "INT32", {1});
         r.add_raw_input_contents(Int32s({1}));
         (*r.mutable_parameters())["sequence_id"].set_uint64_param(~0ull);
       },
       ::grpc::StatusCode::INVALID_ARGUMENT,
       "request parameter 'sequence_id': uint64_param 18446744073709551615 is larger"},
      {[](ModelInferRequest& r) {
         r.set_model_version("latest");
         AddInput(r, "INPUT0", "INT32", {1});
         r.add_raw_input_contents(Int32s({1}));
       },
       ::grpc::StatusCode::INVALID_ARGUMENT, "model_version \"latest\" is not a non-negative"},
      {[](ModelInferRequest& r) {
         AddInput(r, "INPUT0", "INT32", {-1});
         r.add_raw_input_contents(Int32s({1}));
       },
       ::grpc::StatusCode::INVALID_ARGUMENT, "shape [-1] has a negative dim"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    ModelInferRequest r;
    r.set_model_name("echo");
    cases[i].build(r);
    EXPECT_THAT(InferError(r, cases[i].code), HasSubstr(cases[i].text)) << "case " << i;
  }
  EXPECT_EQ(fake_.finished_requests(), 0);  // none reached the core
}

TEST_F(GrpcFrontendTest, CoreErrorsMapToGrpcCodesWithTritonsText) {
  ModelInferRequest unknown;
  unknown.set_model_name("nope");
  EXPECT_THAT(InferError(unknown, ::grpc::StatusCode::NOT_FOUND),
              HasSubstr("Request for unknown model: 'nope' is not found"));
  ModelInferRequest full;
  full.set_model_name("full");
  EXPECT_THAT(InferError(full, ::grpc::StatusCode::UNAVAILABLE),
              HasSubstr("Exceeds maximum queue size"));
  EXPECT_THAT(InferError(StreamRequest("d", 2), ::grpc::StatusCode::UNIMPLEMENTED),
              HasSubstr("ModelInfer RPC doesn't support models with decoupled transaction policy"));
  ModelInferRequest empty;
  EXPECT_THAT(InferError(empty, ::grpc::StatusCode::INVALID_ARGUMENT),
              HasSubstr("model_name is empty"));
}

TEST_F(GrpcFrontendTest, StreamDeliversEveryResponseInOrderWithTheFinalFlag) {
  ModelInferRequest with_empty_final = StreamRequest("b", 2);
  (*with_empty_final.mutable_parameters())[kEnableEmptyFinalResponse].set_bool_param(true);
  ::grpc::Status status;
  auto messages = StreamAll({StreamRequest("a", 4, 5), with_empty_final}, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<int> a_indices;
  int b_data = 0, b_empty_final = 0;
  for (const auto& m : messages) {
    ASSERT_TRUE(m.error_message().empty()) << m.error_message();
    const auto& r = m.infer_response();
    EXPECT_EQ(r.model_name(), "stream");
    const bool final_flag = r.parameters().at(kFinalResponse).bool_param();
    if (r.id() == "a") {
      ASSERT_EQ(r.raw_output_contents_size(), 1);
      a_indices.push_back(FirstInt32(r.raw_output_contents(0)));
      EXPECT_FALSE(final_flag);  // the model ends with a flag-only FINAL, not asked for here
    } else {
      ASSERT_EQ(r.id(), "b");
      if (r.outputs_size() == 0) {
        ++b_empty_final;
        EXPECT_TRUE(final_flag);
        EXPECT_FALSE(r.parameters().count(kEnableEmptyFinalResponse));
      } else {
        ++b_data;
        EXPECT_FALSE(final_flag);
      }
    }
  }
  EXPECT_EQ(a_indices, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(b_data, 2);
  EXPECT_EQ(b_empty_final, 1);
  // The parameter is the stream's, not the model's.
  for (const auto& [key, value] : fake_.last_request().parameters) {
    EXPECT_NE(key, kEnableEmptyFinalResponse);
  }
}

TEST_F(GrpcFrontendTest, StreamErrorAnswersItsRequestAndTheStreamGoesOn) {
  ModelInferRequest unknown;
  unknown.set_model_name("nope");
  unknown.set_id("u");
  ModelInferRequest malformed = StreamRequest("m", 1);
  malformed.mutable_raw_input_contents(0)->resize(2);
  ::grpc::Status status;
  auto messages =
      StreamAll({StreamRequest("f", 5, 0, 2), unknown, malformed, StreamRequest("ok", 2)}, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  int f_data = 0, ok_data = 0;
  std::map<std::string, std::string> errors;
  for (const auto& m : messages) {
    const std::string& id = m.infer_response().id();
    if (!m.error_message().empty()) {
      errors[id] = m.error_message();
    } else if (id == "f") {
      ++f_data;
    } else if (id == "ok") {
      ++ok_data;
    }
  }
  EXPECT_EQ(f_data, 2);
  EXPECT_EQ(ok_data, 2);
  EXPECT_THAT(errors["f"], HasSubstr("failing at index 2"));
  EXPECT_THAT(errors["u"], HasSubstr("Request for unknown model: 'nope'"));
  EXPECT_THAT(errors["m"], HasSubstr("needs 4 bytes but its raw_input_contents holds 2"));
}

TEST_F(GrpcFrontendTest, ClientCancellingAStreamCancelsItsRequests) {
  ::grpc::ClientContext context;
  auto stream = stub_->ModelStreamInfer(&context);
  ASSERT_TRUE(stream->Write(StreamRequest("long-1", 1000, 10)));
  ASSERT_TRUE(stream->Write(StreamRequest("long-2", 1000, 10)));
  ModelStreamInferResponse message;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(stream->Read(&message));
  context.TryCancel();
  while (stream->Read(&message)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), ::grpc::StatusCode::CANCELLED);
  WaitForCancelled(2);
  EXPECT_EQ(fake_.finished_requests(), 0);
}

TEST_F(GrpcFrontendTest, UnaryDeadlineCancelsTheRequest) {
  ModelInferRequest r;
  r.set_model_name("echo");
  AddInput(r, "INPUT0", "INT32", {1});
  r.add_raw_input_contents(Int32s({1}));
  AddInput(r, "DELAY_MS", "INT32", {1});
  r.add_raw_input_contents(Int32s({10000}));
  ::grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  ModelInferResponse response;
  const auto start = std::chrono::steady_clock::now();
  auto status = stub_->ModelInfer(&context, r, &response);
  EXPECT_EQ(status.error_code(), ::grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  WaitForCancelled(1);
}

TEST_F(GrpcFrontendTest, StopCancelsOpenStreams) {
  std::thread client([this] {
    ::grpc::ClientContext context;
    auto stream = stub_->ModelStreamInfer(&context);
    EXPECT_TRUE(stream->Write(StreamRequest("held", 1000, 10)));
    ModelStreamInferResponse message;
    while (stream->Read(&message)) {
    }
    EXPECT_FALSE(stream->Finish().ok());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  service_->Stop(std::chrono::milliseconds(100));
  client.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  WaitForCancelled(1);
}

TEST_F(GrpcFrontendTest, ThirtyTwoConcurrentStreamsAllGetTheirAnswers) {
  std::vector<std::thread> clients;
  clients.reserve(32);
  std::atomic<int> complete{0};
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([this, c, &complete] {
      ::grpc::Status status;
      auto messages = StreamAll({StreamRequest("c" + std::to_string(c), 20, 1)}, &status);
      EXPECT_TRUE(status.ok()) << status.error_message();
      std::vector<int> indices;
      indices.reserve(messages.size());
      for (const auto& m : messages)
        indices.push_back(FirstInt32(m.infer_response().raw_output_contents(0)));
      std::vector<int> expected(20);
      for (int i = 0; i < 20; ++i) expected[i] = i;
      if (indices == expected) ++complete;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(complete.load(), 32);
}

}  // namespace
}  // namespace inflight::server::grpc_frontend
