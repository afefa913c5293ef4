// TRITONBACKEND_Backend*, TRITONBACKEND_Model*, TRITONBACKEND_ModelInstance*,
// TRITONBACKEND_BackendAttribute*, and the statistics reports.
#include <string>

#include "config/model_config_loader.h"
#include "server/backend_objects.h"
#include "server/inference_request.h"

using inflight::server::Backend;
using inflight::server::FailureReason;
using inflight::server::FromHandle;
using inflight::server::InferenceRequest;
using inflight::server::Model;
using inflight::server::ModelInstance;
using inflight::server::ToHandle;
using inflight::server::ToTritonError;

namespace inflight::server {
TRITONBACKEND_MemoryManager* GlobalMemoryManager();
}

namespace {

Backend* B(TRITONBACKEND_Backend* b) {
  return FromHandle<Backend>(b);
}
Model* Mdl(TRITONBACKEND_Model* m) {
  return FromHandle<Model>(m);
}
ModelInstance* Inst(TRITONBACKEND_ModelInstance* i) {
  return FromHandle<ModelInstance>(i);
}

TRITONSERVER_Error* Err(TRITONSERVER_Error_Code code, const std::string& msg) {
  return TRITONSERVER_ErrorNew(code, msg.c_str());
}

TRITONSERVER_Error* CheckConfigVersion(uint32_t config_version) {
  if (config_version != 1) {
    return Err(TRITONSERVER_ERROR_UNSUPPORTED, "model configuration version " +
                                                   std::to_string(config_version) +
                                                   " is not supported; only version 1 is");
  }
  return nullptr;
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_ApiVersion(uint32_t* major, uint32_t* minor) {
  INFLIGHT_API_REQUIRE(major);
  INFLIGHT_API_REQUIRE(minor);
  *major = TRITONBACKEND_API_VERSION_MAJOR;
  *minor = TRITONBACKEND_API_VERSION_MINOR;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendName(TRITONBACKEND_Backend* backend, const char** name) {
  INFLIGHT_API_REQUIRE(backend);
  INFLIGHT_API_REQUIRE(name);
  *name = B(backend)->name.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendConfig(TRITONBACKEND_Backend* backend,
                                                TRITONSERVER_Message** backend_config) {
  INFLIGHT_API_REQUIRE(backend);
  INFLIGHT_API_REQUIRE(backend_config);
  *backend_config = &B(backend)->config;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendExecutionPolicy(TRITONBACKEND_Backend* backend,
                                                         TRITONBACKEND_ExecutionPolicy* policy) {
  INFLIGHT_API_REQUIRE(backend);
  INFLIGHT_API_REQUIRE(policy);
  *policy = B(backend)->execution_policy;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendSetExecutionPolicy(TRITONBACKEND_Backend* backend,
                                                            TRITONBACKEND_ExecutionPolicy policy) {
  INFLIGHT_API_REQUIRE(backend);
  // Every instance runs on its own thread, so both policies behave the same here.
  B(backend)->execution_policy = policy;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendArtifacts(TRITONBACKEND_Backend* backend,
                                                   TRITONBACKEND_ArtifactType* artifact_type,
                                                   const char** location) {
  INFLIGHT_API_REQUIRE(backend);
  INFLIGHT_API_REQUIRE(artifact_type);
  INFLIGHT_API_REQUIRE(location);
  *artifact_type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  *location = B(backend)->directory.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendMemoryManager(TRITONBACKEND_Backend* backend,
                                                       TRITONBACKEND_MemoryManager** manager) {
  INFLIGHT_API_REQUIRE(backend);
  INFLIGHT_API_REQUIRE(manager);
  *manager = inflight::server::GlobalMemoryManager();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendState(TRITONBACKEND_Backend* backend, void** state) {
  INFLIGHT_API_REQUIRE(backend);
  INFLIGHT_API_REQUIRE(state);
  *state = B(backend)->state;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendSetState(TRITONBACKEND_Backend* backend, void* state) {
  INFLIGHT_API_REQUIRE(backend);
  B(backend)->state = state;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(
    TRITONBACKEND_BackendAttribute* backend_attributes, const TRITONSERVER_InstanceGroupKind kind,
    const uint64_t count, const uint64_t* device_ids, const uint64_t id_count) {
  INFLIGHT_API_REQUIRE(backend_attributes);
  if (device_ids == nullptr && id_count > 0) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG, "device_ids is null but id_count > 0");
  }
  Backend::PreferredGroup group;
  group.kind = kind;
  group.count = count;
  group.device_ids.assign(device_ids, device_ids + id_count);
  FromHandle<Backend>(backend_attributes)->preferred_groups.push_back(std::move(group));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading(
    TRITONBACKEND_BackendAttribute* backend_attributes, bool enabled) {
  INFLIGHT_API_REQUIRE(backend_attributes);
  FromHandle<Backend>(backend_attributes)->parallel_instance_loading = enabled;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelName(TRITONBACKEND_Model* model, const char** name) {
  INFLIGHT_API_REQUIRE(model);
  INFLIGHT_API_REQUIRE(name);
  *name = Mdl(model)->name.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelVersion(TRITONBACKEND_Model* model, uint64_t* version) {
  INFLIGHT_API_REQUIRE(model);
  INFLIGHT_API_REQUIRE(version);
  *version = static_cast<uint64_t>(Mdl(model)->version);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelRepository(TRITONBACKEND_Model* model,
                                                  TRITONBACKEND_ArtifactType* artifact_type,
                                                  const char** location) {
  INFLIGHT_API_REQUIRE(model);
  INFLIGHT_API_REQUIRE(artifact_type);
  INFLIGHT_API_REQUIRE(location);
  *artifact_type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  *location = Mdl(model)->path.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelConfig(TRITONBACKEND_Model* model,
                                              const uint32_t config_version,
                                              TRITONSERVER_Message** model_config) {
  INFLIGHT_API_REQUIRE(model);
  INFLIGHT_API_REQUIRE(model_config);
  if (auto* err = CheckConfigVersion(config_version)) return err;
  auto json = inflight::config::ModelConfigToJson(Mdl(model)->config);
  if (!json.ok()) return ToTritonError(json.status());
  *model_config = new TRITONSERVER_Message{std::move(json).value()};
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelAutoCompleteConfig(TRITONBACKEND_Model* model,
                                                          bool* auto_complete_config) {
  INFLIGHT_API_REQUIRE(model);
  INFLIGHT_API_REQUIRE(auto_complete_config);
  *auto_complete_config = Mdl(model)->auto_complete_config;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelSetConfig(TRITONBACKEND_Model* model,
                                                 const uint32_t config_version,
                                                 TRITONSERVER_Message* model_config) {
  INFLIGHT_API_REQUIRE(model);
  INFLIGHT_API_REQUIRE(model_config);
  if (auto* err = CheckConfigVersion(config_version)) return err;
  auto parsed = inflight::config::ParseModelConfigJson(model_config->json);
  if (!parsed.ok()) return ToTritonError(parsed.status());
  Model* m = Mdl(model);
  if (!parsed->name().empty() && parsed->name() != m->name) {
    return Err(TRITONSERVER_ERROR_INVALID_ARG,
               "TRITONBACKEND_ModelSetConfig: the new config names "
               "model '" +
                   parsed->name() + "', expected '" + m->name + "'");
  }
  m->config = std::move(parsed).value();
  m->config.set_name(m->name);
  m->decoupled = m->config.model_transaction_policy().decoupled();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelServer(TRITONBACKEND_Model* model,
                                              TRITONSERVER_Server** server) {
  INFLIGHT_API_REQUIRE(model);
  INFLIGHT_API_REQUIRE(server);
  *server = ToHandle<TRITONSERVER_Server>(Mdl(model)->server);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelBackend(TRITONBACKEND_Model* model,
                                               TRITONBACKEND_Backend** backend) {
  INFLIGHT_API_REQUIRE(model);
  INFLIGHT_API_REQUIRE(backend);
  *backend = ToHandle<TRITONBACKEND_Backend>(Mdl(model)->backend);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelState(TRITONBACKEND_Model* model, void** state) {
  INFLIGHT_API_REQUIRE(model);
  INFLIGHT_API_REQUIRE(state);
  *state = Mdl(model)->state;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelSetState(TRITONBACKEND_Model* model, void* state) {
  INFLIGHT_API_REQUIRE(model);
  Mdl(model)->state = state;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelReportMemoryUsage(TRITONBACKEND_Model* model,
                                                         TRITONSERVER_BufferAttributes** usage,
                                                         uint32_t usage_size) {
  INFLIGHT_API_REQUIRE(model);
  (void)usage;
  (void)usage_size;  // accepted; not reported in statistics yet
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceName(TRITONBACKEND_ModelInstance* instance,
                                                    const char** name) {
  INFLIGHT_API_REQUIRE(instance);
  INFLIGHT_API_REQUIRE(name);
  *name = Inst(instance)->name.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceKind(TRITONBACKEND_ModelInstance* instance,
                                                    TRITONSERVER_InstanceGroupKind* kind) {
  INFLIGHT_API_REQUIRE(instance);
  INFLIGHT_API_REQUIRE(kind);
  *kind = Inst(instance)->kind;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceDeviceId(TRITONBACKEND_ModelInstance* instance,
                                                        int32_t* device_id) {
  INFLIGHT_API_REQUIRE(instance);
  INFLIGHT_API_REQUIRE(device_id);
  *device_id = Inst(instance)->device_id;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceIsPassive(TRITONBACKEND_ModelInstance* instance,
                                                         bool* is_passive) {
  INFLIGHT_API_REQUIRE(instance);
  INFLIGHT_API_REQUIRE(is_passive);
  *is_passive = Inst(instance)->passive;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance* instance,
                                                     TRITONBACKEND_Model** model) {
  INFLIGHT_API_REQUIRE(instance);
  INFLIGHT_API_REQUIRE(model);
  *model = ToHandle<TRITONBACKEND_Model>(Inst(instance)->model);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance* instance,
                                                     void** state) {
  INFLIGHT_API_REQUIRE(instance);
  INFLIGHT_API_REQUIRE(state);
  *state = Inst(instance)->state;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceSetState(TRITONBACKEND_ModelInstance* instance,
                                                        void* state) {
  INFLIGHT_API_REQUIRE(instance);
  Inst(instance)->state = state;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportMemoryUsage(
    TRITONBACKEND_ModelInstance* instance, TRITONSERVER_BufferAttributes** usage,
    uint32_t usage_size) {
  INFLIGHT_API_REQUIRE(instance);
  (void)usage;
  (void)usage_size;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request, const bool success,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns, const uint64_t compute_end_ns,
    const uint64_t exec_end_ns) {
  INFLIGHT_API_REQUIRE(instance);
  INFLIGHT_API_REQUIRE(request);
  const InferenceRequest* r = FromHandle<InferenceRequest>(request);
  // A request that fails after its client cancelled it counts as cancelled, not as a backend error.
  const bool cancelled = r->channel != nullptr && r->channel->IsCancelled();
  Inst(instance)->model->stats->ReportRequest(
      success, r->queue_start_ns, exec_start_ns, compute_start_ns, compute_end_ns, exec_end_ns,
      cancelled ? FailureReason::kCanceled : FailureReason::kBackend);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance* instance, const uint64_t batch_size, const uint64_t exec_start_ns,
    const uint64_t compute_start_ns, const uint64_t compute_end_ns, const uint64_t exec_end_ns) {
  INFLIGHT_API_REQUIRE(instance);
  Inst(instance)->model->stats->ReportBatch(batch_size, exec_start_ns, compute_start_ns,
                                            compute_end_ns, exec_end_ns);
  return nullptr;
}

}  // extern "C"
