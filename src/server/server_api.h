// What the inflight-server core offers its frontends (HTTP now; gRPC could be another).
//
// The core (server_core.cc and friends) owns the model repository, the loaded backends, the
// instance schedulers and the ensemble scheduler; a frontend only converts wire formats to these
// types and back.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "inflight/status.h"
#include "triton/core/tritonserver.h"

namespace inference {
class ModelConfig;
}

namespace inflight::server {

// A tensor on the host. BYTES elements are serialized as Triton does: a 4-byte little-endian
// length, then the bytes, one after another.
struct Tensor {
  std::string name;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<std::int64_t> shape;
  std::vector<char> data;
};

using ParameterValue = std::variant<std::string, std::int64_t, bool, double>;

struct InferRequest {
  std::string model_name;
  std::int64_t model_version = -1;  // -1: latest ready version
  std::string id;                   // client's request id, echoed back
  std::vector<Tensor> inputs;
  std::vector<std::string> requested_outputs;  // empty: every output
  std::map<std::string, ParameterValue> parameters;
};

struct InferResponse {
  std::string model_name;
  std::int64_t model_version = 0;
  std::string id;
  std::vector<Tensor> outputs;
  std::map<std::string, ParameterValue> parameters;
  std::optional<Status> error;  // set: this response is an error (and the last one)
  bool is_final = false;        // the last response of the request (may carry no outputs)
};

// Called once per response, from a core thread; the last call has is_final (or an error).
using ResponseCallback = std::function<void(InferResponse)>;

// Handle to a request in flight: cancel it (the backend sees TRITONBACKEND_RequestIsCancelled /
// ResponseFactoryIsCancelled as true); dropping the handle does not cancel.
class InflightRequest {
 public:
  virtual ~InflightRequest() = default;
  virtual void Cancel() = 0;
};

struct TensorMetadata {
  std::string name;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<std::int64_t> shape;  // with -1 for variable dims, batch dim included when batching
  bool optional = false;
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;  // "ensemble" or the backend name
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

struct ModelIndexEntry {
  std::string name;
  std::string version;  // empty when not loaded
  std::string state;    // READY, UNAVAILABLE, LOADING
  std::string reason;   // load error when UNAVAILABLE
};

struct ServerOptions {
  std::vector<std::string> model_repositories;
  std::string backend_directory = "/opt/tritonserver/backends";
  // --backend-config=<backend>,<key>=<value>
  std::map<std::string, std::map<std::string, std::string>> backend_config;
  bool explicit_model_control = false;      // --model-control-mode=explicit
  std::vector<std::string> startup_models;  // --load-model (explicit mode; "*" = all)
  bool strict_readiness = true;
  // --exit-timeout-secs: how long Shutdown waits for requests in flight before cancelling them (and
  // as long again before answering what is left with an error).
  double exit_timeout_secs = 30.0;
};

class Server {
 public:
  // Scans the repositories and loads models (all, or the explicit list). A model that fails to load
  // is UNAVAILABLE with its reason; the server still starts (as tritonserver with
  // --exit-on-error=false).
  static Result<std::unique_ptr<Server>> Create(const ServerOptions& options);
  virtual ~Server() = default;

  virtual bool IsLive() const = 0;
  virtual bool IsReady() const = 0;  // every model that was asked for is READY
  virtual bool ModelIsReady(const std::string& name, std::int64_t version) const = 0;
  virtual std::vector<ModelIndexEntry> ModelIndex() const = 0;
  virtual Result<ModelMetadata> GetModelMetadata(const std::string& name,
                                                 std::int64_t version) const = 0;
  // The model's configuration as Triton's JSON (what GET /v2/models/<m>/config returns).
  virtual Result<std::string> GetModelConfigJson(const std::string& name,
                                                 std::int64_t version) const = 0;
  virtual Result<bool> ModelIsDecoupled(const std::string& name, std::int64_t version) const = 0;
  // The configuration's max_batch_size (0: the model does not batch). /generate asks on every
  // request, so this must be cheap (no JSON round trip).
  virtual Result<std::int64_t> ModelMaxBatchSize(const std::string& name,
                                                 std::int64_t version) const = 0;

  // Validates the request against the model config (unknown model → kNotFound; missing required
  // input, wrong dtype or shape → kInvalidArgument naming the tensor) and queues it. Errors found
  // later arrive through the callback. A full queue → kUnavailable with Triton's message.
  virtual Result<std::shared_ptr<InflightRequest>> Infer(InferRequest request,
                                                         ResponseCallback callback) = 0;

  // Prometheus text exposition: nv_inference_* per model plus every metric family backends created.
  virtual std::string MetricsText() const = 0;

  // Per-model statistics as Triton's /v2/models/<m>/stats JSON.
  virtual Result<std::string> ModelStatisticsJson(const std::string& name) const = 0;

  // Unloads every model (finalizing instances and backends) and stops accepting requests.
  virtual void Shutdown() = 0;
};

}  // namespace inflight::server
