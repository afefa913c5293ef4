#include "server/grpc/grpc_service.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include "common/logging.h"
#include "config/model_config_loader.h"
#include "grpc_service.grpc.pb.h"
#include "server/grpc/grpc_infer_calls.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/grpc_tensors.h"

#ifndef INFLIGHT_VERSION_STRING
#define INFLIGHT_VERSION_STRING "0.1.0"
#endif

namespace inflight::server::grpc_frontend {
namespace {

using ::grpc::CallbackServerContext;
using ::grpc::ServerUnaryReactor;

// Answers a unary call at once.
ServerUnaryReactor* Reply(CallbackServerContext* context, const ::grpc::Status& status) {
  ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}
ServerUnaryReactor* Reply(CallbackServerContext* context, const Status& status) {
  return Reply(context, ToGrpcStatus(status));
}

ServerUnaryReactor* NoSharedMemory(CallbackServerContext* context, const char* kind) {
  return Reply(context, Unsupported(std::string(kind) +
                                    " shared memory is not supported by inflight-server; send "
                                    "tensors in the request (raw_input_contents)"));
}

void FillTensorMetadata(
    const std::vector<TensorMetadata>& in,
    google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* out) {
  for (const TensorMetadata& t : in) {
    auto* m = out->Add();
    m->set_name(t.name);
    m->set_datatype(TRITONSERVER_DataTypeString(t.datatype));
    for (std::int64_t d : t.shape) m->add_shape(d);
  }
}

}  // namespace

// Every RPC of the service. Each returns at once: inference work goes to the core with a
// callback (grpc_infer_calls.h); the rest answers from the core's state.
class GrpcService::Handlers final : public inference::GRPCInferenceService::CallbackService {
 public:
  Handlers(Server& core, const GrpcServiceOptions& options) : core_(core), options_(options) {}

  ServerUnaryReactor* ServerLive(CallbackServerContext* context,
                                 const inference::ServerLiveRequest*,
                                 inference::ServerLiveResponse* response) override {
    response->set_live(core_.IsLive());
    return Reply(context, ::grpc::Status::OK);
  }

  ServerUnaryReactor* ServerReady(CallbackServerContext* context,
                                  const inference::ServerReadyRequest*,
                                  inference::ServerReadyResponse* response) override {
    response->set_ready(core_.IsReady());
    return Reply(context, ::grpc::Status::OK);
  }

  ServerUnaryReactor* ModelReady(CallbackServerContext* context,
                                 const inference::ModelReadyRequest* request,
                                 inference::ModelReadyResponse* response) override {
    auto version = ParseModelVersion("version", request->version());
    if (!version.ok()) return Reply(context, version.status());
    response->set_ready(core_.ModelIsReady(request->name(), *version));
    return Reply(context, ::grpc::Status::OK);
  }

  ServerUnaryReactor* ServerMetadata(CallbackServerContext* context,
                                     const inference::ServerMetadataRequest*,
                                     inference::ServerMetadataResponse* response) override {
    response->set_name("inflight");
    response->set_version(INFLIGHT_VERSION_STRING);
    for (const char* extension :
         {"model_repository", "model_configuration", "statistics", "parameters"}) {
      response->add_extensions(extension);
    }
    return Reply(context, ::grpc::Status::OK);
  }

  ServerUnaryReactor* ModelMetadata(CallbackServerContext* context,
                                    const inference::ModelMetadataRequest* request,
                                    inference::ModelMetadataResponse* response) override {
    auto version = ParseModelVersion("version", request->version());
    if (!version.ok()) return Reply(context, version.status());
    auto metadata = core_.GetModelMetadata(request->name(), *version);
    if (!metadata.ok()) return Reply(context, metadata.status());
    response->set_name(metadata->name);
    for (const std::string& v : metadata->versions) response->add_versions(v);
    response->set_platform(metadata->platform);
    FillTensorMetadata(metadata->inputs, response->mutable_inputs());
    FillTensorMetadata(metadata->outputs, response->mutable_outputs());
    return Reply(context, ::grpc::Status::OK);
  }

  ServerUnaryReactor* ModelConfig(CallbackServerContext* context,
                                  const inference::ModelConfigRequest* request,
                                  inference::ModelConfigResponse* response) override {
    auto version = ParseModelVersion("version", request->version());
    if (!version.ok()) return Reply(context, version.status());
    auto json = core_.GetModelConfigJson(request->name(), *version);
    if (!json.ok()) return Reply(context, json.status());
    auto config = config::ParseModelConfigJson(*json);
    if (!config.ok()) {
      return Reply(context, Internal("model '" + request->name() +
                                     "': its configuration does not convert back to ModelConfig: " +
                                     config.status().message()));
    }
    *response->mutable_config() = std::move(*config);
    return Reply(context, ::grpc::Status::OK);
  }

  ServerUnaryReactor* ModelStatistics(CallbackServerContext* context,
                                      const inference::ModelStatisticsRequest* request,
                                      inference::ModelStatisticsResponse* response) override {
    auto version = ParseModelVersion("version", request->version());
    if (!version.ok()) return Reply(context, version.status());
    auto json = core_.ModelStatisticsJson(request->name());
    if (!json.ok()) return Reply(context, json.status());
    // The core keeps Triton's statistics JSON, whose keys are this message's field names.
    google::protobuf::util::JsonParseOptions parse;
    parse.ignore_unknown_fields = true;
    inference::ModelStatisticsResponse all;
    auto st = google::protobuf::util::JsonStringToMessage(*json, &all, parse);
    if (!st.ok()) {
      return Reply(context,
                   Internal("model statistics do not convert to ModelStatisticsResponse: " +
                            std::string(st.message())));
    }
    for (auto& stats : *all.mutable_model_stats()) {
      if (*version >= 0 && stats.version() != request->version()) continue;
      *response->add_model_stats() = std::move(stats);
    }
    if (*version >= 0 && response->model_stats_size() == 0) {
      return Reply(context, NotFound("Request for unknown model: '" + request->name() +
                                     "' version " + request->version() + " is not found"));
    }
    return Reply(context, ::grpc::Status::OK);
  }

  ServerUnaryReactor* RepositoryIndex(CallbackServerContext* context,
                                      const inference::RepositoryIndexRequest* request,
                                      inference::RepositoryIndexResponse* response) override {
    if (!request->repository_name().empty()) {
      return Reply(context, Unsupported("repository_name \"" + request->repository_name() +
                                        "\": naming a repository is not supported; leave it "
                                        "empty for every repository"));
    }
    for (const ModelIndexEntry& entry : core_.ModelIndex()) {
      if (request->ready() && entry.state != "READY") continue;
      auto* model = response->add_models();
      model->set_name(entry.name);
      model->set_version(entry.version);
      model->set_state(entry.state);
      model->set_reason(entry.reason);
    }
    return Reply(context, ::grpc::Status::OK);
  }

  ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* context,
                                          const inference::RepositoryModelLoadRequest* request,
                                          inference::RepositoryModelLoadResponse*) override {
    return Reply(context, RefuseModelControl("load", request->model_name()));
  }

  ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* context,
                                            const inference::RepositoryModelUnloadRequest* request,
                                            inference::RepositoryModelUnloadResponse*) override {
    return Reply(context, RefuseModelControl("unload", request->model_name()));
  }

  ServerUnaryReactor* ModelInfer(CallbackServerContext* context,
                                 const inference::ModelInferRequest* request,
                                 inference::ModelInferResponse* response) override {
    return StartModelInfer(core_, context, request, response);
  }

  ::grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(CallbackServerContext* context) override {
    return StartModelStreamInfer(core_, context);
  }

  ServerUnaryReactor* SystemSharedMemoryStatus(
      CallbackServerContext* context, const inference::SystemSharedMemoryStatusRequest*,
      inference::SystemSharedMemoryStatusResponse*) override {
    return NoSharedMemory(context, "system");
  }
  ServerUnaryReactor* SystemSharedMemoryRegister(
      CallbackServerContext* context, const inference::SystemSharedMemoryRegisterRequest*,
      inference::SystemSharedMemoryRegisterResponse*) override {
    return NoSharedMemory(context, "system");
  }
  ServerUnaryReactor* SystemSharedMemoryUnregister(
      CallbackServerContext* context, const inference::SystemSharedMemoryUnregisterRequest*,
      inference::SystemSharedMemoryUnregisterResponse*) override {
    return NoSharedMemory(context, "system");
  }
  ServerUnaryReactor* CudaSharedMemoryStatus(CallbackServerContext* context,
                                             const inference::CudaSharedMemoryStatusRequest*,
                                             inference::CudaSharedMemoryStatusResponse*) override {
    return NoSharedMemory(context, "CUDA");
  }
  ServerUnaryReactor* CudaSharedMemoryRegister(
      CallbackServerContext* context, const inference::CudaSharedMemoryRegisterRequest*,
      inference::CudaSharedMemoryRegisterResponse*) override {
    return NoSharedMemory(context, "CUDA");
  }
  ServerUnaryReactor* CudaSharedMemoryUnregister(
      CallbackServerContext* context, const inference::CudaSharedMemoryUnregisterRequest*,
      inference::CudaSharedMemoryUnregisterResponse*) override {
    return NoSharedMemory(context, "CUDA");
  }

 private:
  Status RefuseModelControl(const char* what, const std::string& model) const {
    if (!options_.explicit_model_control) {
      // tritonserver's answer outside explicit mode.
      return Unavailable("explicit model " + std::string(what) + " of '" + model +
                         "' is not allowed: the server runs with --model-control-mode=none");
    }
    return Unsupported("explicit model " + std::string(what) + " of '" + model +
                       "' is not supported: inflight-server loads the models named by "
                       "--load-model once, at start-up");
  }

  Server& core_;
  const GrpcServiceOptions& options_;
};

GrpcService::GrpcService(Server& server, GrpcServiceOptions options)
    : core_(server), options_(std::move(options)) {}

GrpcService::~GrpcService() {
  Stop(std::chrono::milliseconds(0));
}

Status GrpcService::Start() {
  handlers_ = std::make_unique<Handlers>(core_, options_);
  const bool ipv6 = options_.address.find(':') != std::string::npos;
  const std::string target = (ipv6 ? "[" + options_.address + "]" : options_.address) + ":" +
                             std::to_string(options_.port);
  ::grpc::ServerBuilder builder;
  builder.AddListeningPort(target, ::grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  builder.RegisterService(handlers_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return Unavailable("cannot serve gRPC on " + target +
                       " (address in use or not an address of this machine?)");
  }
  return Status::Ok();
}

void GrpcService::Stop(std::chrono::milliseconds grace) {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
}

}  // namespace inflight::server::grpc_frontend
