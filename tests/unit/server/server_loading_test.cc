// Repository scanning and model loading: good models READY, broken ones UNAVAILABLE with reasons.
#include <gtest/gtest.h>

#include "server/backend_library.h"
#include "test_server.h"

namespace inflight::server {
namespace {

using testing::MakeServer;
using testing::TestOptions;

const ModelIndexEntry* Find(const std::vector<ModelIndexEntry>& index, const std::string& name) {
  for (const auto& e : index) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

TEST(ServerLoading, GoodModelsReadyBrokenOnesUnavailableWithReasons) {
  auto server = MakeServer(TestOptions());
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->IsLive());
  const auto index = server->ModelIndex();
  for (const char* good : {"echo", "stream", "batched", "slow_queue", "exec_error", "ensemble_echo",
                           "ensemble_stream"}) {
    const auto* e = Find(index, good);
    ASSERT_NE(e, nullptr) << good;
    EXPECT_EQ(e->state, "READY") << good << ": " << e->reason;
    EXPECT_EQ(e->version, "1") << good;
    EXPECT_TRUE(server->ModelIsReady(good, -1)) << good;
    EXPECT_TRUE(server->ModelIsReady(good, 1)) << good;
    EXPECT_FALSE(server->ModelIsReady(good, 2)) << good;
  }
  const auto* broken = Find(index, "broken_config");
  ASSERT_NE(broken, nullptr);
  EXPECT_EQ(broken->state, "UNAVAILABLE");
  EXPECT_NE(broken->reason.find("broken_config"), std::string::npos) << broken->reason;

  const auto* unknown = Find(index, "unknown_backend");
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->state, "UNAVAILABLE");
  EXPECT_NE(unknown->reason.find("libtriton_does_not_exist.so"), std::string::npos)
      << unknown->reason;

  const auto* dependent = Find(index, "ensemble_broken_step");
  ASSERT_NE(dependent, nullptr);
  EXPECT_EQ(dependent->state, "UNAVAILABLE");
  EXPECT_NE(dependent->reason.find("unknown_backend"), std::string::npos) << dependent->reason;

  // Every model was asked for and some failed, so the server is not ready.
  EXPECT_FALSE(server->IsReady());
}

TEST(ServerLoading, ExplicitModeLoadsListedModelsAndEnsembleSteps) {
  auto options = TestOptions();
  options.explicit_model_control = true;
  options.startup_models = {"ensemble_echo"};
  auto server = MakeServer(options);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->ModelIsReady("ensemble_echo", -1));
  EXPECT_TRUE(server->ModelIsReady("echo", -1));
  EXPECT_FALSE(server->ModelIsReady("stream", -1));
  EXPECT_TRUE(server->IsReady());
  const auto index = server->ModelIndex();  // Find points into it
  const auto* stream = Find(index, "stream");
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(stream->state, "UNAVAILABLE");
}

TEST(ServerLoading, BackendInitializeFailureMakesItsModelsUnavailable) {
  auto options = TestOptions();
  options.explicit_model_control = true;
  options.startup_models = {"echo", "stream"};
  options.backend_config["inflight_test_echo"]["fail-init"] = "true";
  auto server = MakeServer(options);
  ASSERT_NE(server, nullptr);
  const auto index = server->ModelIndex();  // Find points into it
  for (const char* name : {"echo", "stream"}) {
    const auto* e = Find(index, name);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->state, "UNAVAILABLE");
    EXPECT_NE(e->reason.find("asked to fail initialization"), std::string::npos) << e->reason;
  }
}

TEST(ServerLoading, MetadataConfigAndDecoupled) {
  auto server = MakeServer(TestOptions());
  ASSERT_NE(server, nullptr);
  auto md = server->GetModelMetadata("batched", -1);
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  EXPECT_EQ(md->platform, "inflight_test_echo");
  EXPECT_EQ(md->versions, std::vector<std::string>{"1"});
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].name, "IN0");
  EXPECT_EQ(md->inputs[0].datatype, TRITONSERVER_TYPE_FP32);
  EXPECT_EQ(md->inputs[0].shape, (std::vector<int64_t>{-1, 2}));
  auto echo_md = server->GetModelMetadata("echo", -1);
  ASSERT_TRUE(echo_md.ok());
  EXPECT_TRUE(echo_md->inputs[1].optional);
  EXPECT_EQ(echo_md->inputs[1].datatype, TRITONSERVER_TYPE_BYTES);
  auto ens_md = server->GetModelMetadata("ensemble_echo", -1);
  ASSERT_TRUE(ens_md.ok());
  EXPECT_EQ(ens_md->platform, "ensemble");

  auto json = server->GetModelConfigJson("echo", -1);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_NE(json->find("\"backend\":\"inflight_test_echo\""), std::string::npos) << *json;
  EXPECT_NE(json->find("KIND_CPU"), std::string::npos) << *json;

  EXPECT_TRUE(server->ModelIsDecoupled("stream", -1).value());
  EXPECT_TRUE(server->ModelIsDecoupled("ensemble_stream", -1).value());
  EXPECT_FALSE(server->ModelIsDecoupled("ensemble_echo", -1).value());
  EXPECT_FALSE(server->ModelIsDecoupled("echo", -1).value());
  EXPECT_EQ(server->GetModelMetadata("unknown_backend", -1).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(server->GetModelMetadata("nope", -1).status().code(), StatusCode::kNotFound);
}

TEST(ServerLoading, LibraryWithoutExecuteIsRefused) {
  auto lib = BackendLibrary::Open("libm.so.6");
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("TRITONBACKEND_ModelInstanceExecute"), std::string::npos)
      << lib.status().message();
}

TEST(ServerLoading, MissingRepositoryIsAnError) {
  auto options = TestOptions();
  options.model_repositories = {"/nonexistent/inflight/repo"};
  auto server = Server::Create(options);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("/nonexistent/inflight/repo"), std::string::npos);
}

}  // namespace
}  // namespace inflight::server
