// What TRITONBACKEND_Backend, _Model and _ModelInstance handles point to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model_config.pb.h"
#include "server/backend_library.h"
#include "server/c_api_objects.h"
#include "server/model_statistics.h"
#include "server/response_channel.h"

namespace inflight::server {

class InstanceScheduler;
class ServerCore;

class Backend {
 public:
  std::string name;
  std::string directory;  // the folder the library came from (TRITONBACKEND_BackendArtifacts)
  std::unique_ptr<BackendLibrary> library;
  TRITONSERVER_Message config;  // {"cmdline":{...}}; owned here, BackendConfig lends it
  void* state = nullptr;
  TRITONBACKEND_ExecutionPolicy execution_policy = TRITONBACKEND_EXECUTION_BLOCKING;
  struct PreferredGroup {
    TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_AUTO;
    uint64_t count = 1;
    std::vector<uint64_t> device_ids;
  };
  std::vector<PreferredGroup> preferred_groups;  // from TRITONBACKEND_GetBackendAttribute
  bool parallel_instance_loading = false;
  bool initialized = false;
};

class ModelInstance {
 public:
  std::string name;
  TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_CPU;
  int32_t device_id = 0;
  bool passive = false;
  class Model* model = nullptr;
  void* state = nullptr;
  bool initialized = false;
};

class Model {
 public:
  Model();
  ~Model();
  std::string name;
  int64_t version = 1;
  std::string path;  // <repository>/<model>: TRITONBACKEND_ModelRepository
  inference::ModelConfig config;
  Backend* backend = nullptr;  // null for ensembles
  void* state = nullptr;
  bool auto_complete_config = true;
  bool decoupled = false;
  bool initialized = false;  // ModelInitialize succeeded: ModelFinalize is owed
  ServerCore* server = nullptr;
  std::vector<std::unique_ptr<ModelInstance>> instances;
  std::unique_ptr<InstanceScheduler> scheduler;
  std::shared_ptr<RequestTracker> tracker = std::make_shared<RequestTracker>();
  std::shared_ptr<ModelStatistics> stats = std::make_shared<ModelStatistics>();
};

}  // namespace inflight::server
