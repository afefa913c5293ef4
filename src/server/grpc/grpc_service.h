// inflight-server's gRPC endpoint: Triton's GRPCInferenceService (proto/grpc_service.proto) on
// gRPC's callback API, over the same Server core as HTTP. tritonclient.grpc, perf_analyzer and
// NVIDIA's TensorRT-LLM client scripts talk to it as to tritonserver's port 8001.
#pragma once

#include <chrono>
#include <climits>
#include <memory>
#include <string>

#include "common/status.h"
#include "server/server_api.h"

namespace grpc {
class Server;
}

namespace inflight::server::grpc_frontend {

struct GrpcServiceOptions {
  std::string address = "0.0.0.0";  // --grpc-address
  int port = 8001;                  // --grpc-port; 0 picks a free port
  // --model-control-mode=explicit: RepositoryModelLoad/Unload are refused as unsupported rather
  // than as not allowed in this mode.
  bool explicit_model_control = false;
  // Largest message either way, in bytes: tritonserver's limit (INT32_MAX), since whole prompts
  // and logits travel as one message.
  int max_message_bytes = INT_MAX;
};

class GrpcService {
 public:
  GrpcService(Server& server, GrpcServiceOptions options);
  ~GrpcService();

  // Binds and starts serving; the port is known when this returns.
  Status Start();
  int port() const { return port_; }
  // Stops taking calls; calls still open after `grace` are cancelled (streams end CANCELLED).
  void Stop(std::chrono::milliseconds grace);

 private:
  class Handlers;
  Server& core_;
  GrpcServiceOptions options_;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<::grpc::Server> server_;
  int port_ = 0;
};

}  // namespace inflight::server::grpc_frontend
