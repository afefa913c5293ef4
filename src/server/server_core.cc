#include "server/server_core.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "config/model_config_loader.h"
#include "server/inference_request.h"
#include "server/instance_scheduler.h"
#include "server/metrics_registry.h"
#include "server/request_validation.h"

#ifdef INFLIGHT_SERVER_CUDA
#include <cuda_runtime_api.h>
#endif

namespace inflight::server {

namespace {

int CountGpus() {
#ifdef INFLIGHT_SERVER_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

// Platforms of Triton's own backends, for configs that name a platform but no backend.
std::string BackendForPlatform(const std::string& platform) {
  if (platform == "tensorrt_plan") return "tensorrt";
  if (platform == "onnxruntime_onnx") return "onnxruntime";
  if (platform == "pytorch_libtorch") return "pytorch";
  if (platform.rfind("tensorflow", 0) == 0) return "tensorflow";
  return platform;
}

TRITONSERVER_InstanceGroupKind ToApiKind(inference::ModelInstanceGroup::Kind kind) {
  switch (kind) {
    case inference::ModelInstanceGroup::KIND_GPU:
      return TRITONSERVER_INSTANCEGROUPKIND_GPU;
    case inference::ModelInstanceGroup::KIND_CPU:
      return TRITONSERVER_INSTANCEGROUPKIND_CPU;
    case inference::ModelInstanceGroup::KIND_MODEL:
      return TRITONSERVER_INSTANCEGROUPKIND_MODEL;
    default:
      return TRITONSERVER_INSTANCEGROUPKIND_AUTO;
  }
}

inference::ModelInstanceGroup::Kind FromApiKind(TRITONSERVER_InstanceGroupKind kind) {
  switch (kind) {
    case TRITONSERVER_INSTANCEGROUPKIND_GPU:
      return inference::ModelInstanceGroup::KIND_GPU;
    case TRITONSERVER_INSTANCEGROUPKIND_CPU:
      return inference::ModelInstanceGroup::KIND_CPU;
    case TRITONSERVER_INSTANCEGROUPKIND_MODEL:
      return inference::ModelInstanceGroup::KIND_MODEL;
    default:
      return inference::ModelInstanceGroup::KIND_AUTO;
  }
}

class ChannelHandle : public InflightRequest {
 public:
  explicit ChannelHandle(std::weak_ptr<ResponseChannel> channel) : channel_(std::move(channel)) {}
  void Cancel() override {
    if (auto c = channel_.lock()) c->Cancel();
  }

 private:
  std::weak_ptr<ResponseChannel> channel_;
};

std::vector<TensorMetadata> TensorsMetadata(const inference::ModelConfig& config, bool inputs) {
  std::vector<TensorMetadata> out;
  auto add = [&](const std::string& name, inference::DataType dt, const auto& dims, bool optional) {
    TensorMetadata t;
    t.name = name;
    t.datatype = static_cast<TRITONSERVER_DataType>(dt);
    if (config.max_batch_size() > 0) t.shape.push_back(-1);
    t.shape.insert(t.shape.end(), dims.begin(), dims.end());
    t.optional = optional;
    out.push_back(std::move(t));
  };
  if (inputs) {
    for (const auto& in : config.input()) add(in.name(), in.data_type(), in.dims(), in.optional());
  } else {
    for (const auto& o : config.output()) add(o.name(), o.data_type(), o.dims(), false);
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Create(const ServerOptions& options) {
  auto core = std::make_unique<ServerCore>(options);
  RETURN_IF_ERROR(core->Load());
  return std::unique_ptr<Server>(std::move(core));
}

ServerCore::ServerCore(ServerOptions options) : options_(std::move(options)) {}

ServerCore::~ServerCore() {
  Shutdown();
}

void ServerCore::SetState(VersionEntry& v, State state, std::string reason) {
  std::lock_guard lock(state_mu_);
  v.state = state;
  v.reason = std::move(reason);
}

Status ServerCore::Load() {
  if (options_.model_repositories.empty()) {
    return InvalidArgument("no model repository given (--model-repository)");
  }
  num_gpus_ = CountGpus();
  ASSIGN_OR_RETURN(auto scanned, ScanRepositories(options_.model_repositories));

  std::set<std::string> wanted;
  const bool load_all = !options_.explicit_model_control ||
                        std::find(options_.startup_models.begin(), options_.startup_models.end(),
                                  "*") != options_.startup_models.end();
  for (auto& m : scanned) {
    const std::string name = m.name;
    ModelEntry entry;
    entry.repo = std::move(m);
    models_.emplace(name, std::move(entry));
  }
  if (!load_all) {
    // Explicit mode: the named models plus, transitively, the steps of named ensembles.
    std::vector<std::string> todo = options_.startup_models;
    while (!todo.empty()) {
      const std::string name = todo.back();
      todo.pop_back();
      if (!wanted.insert(name).second) continue;
      auto it = models_.find(name);
      if (it == models_.end()) {
        ModelEntry missing;
        missing.repo.name = name;
        missing.repo.error = "model '" + name +
                             "' was asked for (--load-model) but is not in any "
                             "model repository";
        models_.emplace(name, std::move(missing));
        continue;
      }
      if (it->second.repo.error.empty() && it->second.repo.IsEnsemble()) {
        for (const auto& step : it->second.repo.config.ensemble_scheduling().step()) {
          todo.push_back(step.model_name());
        }
      }
    }
    for (auto& [name, entry] : models_) entry.requested = wanted.count(name) > 0;
  }

  // Backend models first, then ensembles in dependency order (an ensemble may use an ensemble).
  std::vector<ModelEntry*> ensembles;
  for (auto& [name, entry] : models_) {
    if (!entry.requested) continue;
    if (entry.repo.error.empty() && entry.repo.IsEnsemble()) {
      ensembles.push_back(&entry);
    } else {
      LoadEntry(entry);
    }
  }
  std::set<std::string> attempted;
  for (auto& [name, entry] : models_) {
    if (!entry.requested || !entry.repo.error.empty() || !entry.repo.IsEnsemble()) {
      attempted.insert(name);
    }
  }
  while (!ensembles.empty()) {
    bool progress = false;
    for (auto it = ensembles.begin(); it != ensembles.end();) {
      bool deps_done = true;
      for (const auto& step : (*it)->repo.config.ensemble_scheduling().step()) {
        if (!attempted.count(step.model_name()) && models_.count(step.model_name()))
          deps_done = false;
      }
      if (!deps_done) {
        ++it;
        continue;
      }
      LoadEntry(**it);
      attempted.insert((*it)->repo.name);
      it = ensembles.erase(it);
      progress = true;
    }
    if (!progress) {
      for (ModelEntry* e : ensembles) {
        e->repo.error = "ensemble '" + e->repo.name + "' is part of a cycle of ensembles";
        LoadEntry(*e);
      }
      break;
    }
  }
  accepting_ = true;
  return Status::Ok();
}

void ServerCore::LoadEntry(ModelEntry& entry) {
  const RepositoryModel& repo = entry.repo;
  if (!repo.error.empty()) {
    LOG_ERROR("failed to load '{}': {}", repo.name, repo.error);
    auto v = std::make_unique<VersionEntry>();
    v->version = -1;
    SetState(*v, State::kUnavailable, repo.error);
    entry.versions.push_back(std::move(v));
    return;
  }
  for (int64_t version : repo.versions) {
    auto v = std::make_unique<VersionEntry>();
    v->version = version;
    Status st = repo.IsEnsemble() ? LoadEnsembleModel(entry, *v) : LoadBackendModel(entry, *v);
    if (st.ok()) {
      LOG_INFO("successfully loaded '{}' version {}", repo.name, version);
      SetState(*v, State::kReady, "");
    } else {
      LOG_ERROR("failed to load '{}' version {}: {}", repo.name, version, st.message());
      SetState(*v, State::kUnavailable, st.message());
    }
    entry.versions.push_back(std::move(v));
  }
}

std::string ServerCore::BackendConfigJson(const std::string& backend) const {
  nlohmann::json cmdline = nlohmann::json::object();
  cmdline["auto-complete-config"] = "true";
  cmdline["backend-directory"] = options_.backend_directory;
  cmdline["min-compute-capability"] = "6.000000";
  cmdline["default-max-batch-size"] = "4";
  for (const char* key : {"", backend.c_str()}) {
    auto it = options_.backend_config.find(key);
    if (it == options_.backend_config.end()) continue;
    for (const auto& [k, v] : it->second) cmdline[k] = v;
  }
  return nlohmann::json{{"cmdline", cmdline}}.dump();
}

Result<Backend*> ServerCore::GetBackend(const std::string& name, const RepositoryModel& repo,
                                        int64_t version) {
  if (auto it = backends_.find(name); it != backends_.end()) return it->second.get();
  if (auto it = backend_failures_.find(name); it != backend_failures_.end()) return it->second;
  ASSIGN_OR_RETURN(std::string path, FindBackendLibrary(name, repo.config.runtime(), repo.path,
                                                        version, options_.backend_directory));
  ASSIGN_OR_RETURN(auto library, BackendLibrary::Open(path));
  auto backend = std::make_unique<Backend>();
  backend->name = name;
  backend->directory = std::filesystem::path(path).parent_path().string();
  backend->config.json = BackendConfigJson(name);
  backend->library = std::move(library);
  auto* handle = ToHandle<TRITONBACKEND_Backend>(backend.get());
  if (backend->library->initialize != nullptr) {
    Status st = TakeTritonError(backend->library->initialize(handle));
    if (!st.ok()) {
      Status failure(st.code(), "backend '" + name + "' failed to initialize: " + st.message());
      backend_failures_.emplace(name, failure);
      return failure;
    }
  }
  backend->initialized = true;
  if (backend->library->get_backend_attribute != nullptr) {
    Status st = TakeTritonError(backend->library->get_backend_attribute(
        handle, ToHandle<TRITONBACKEND_BackendAttribute>(backend.get())));
    if (!st.ok())
      LOG_WARN("backend '{}': TRITONBACKEND_GetBackendAttribute: {}", name, st.message());
  }
  LOG_INFO("loaded backend '{}' from {}", name, path);
  Backend* raw = backend.get();
  backends_.emplace(name, std::move(backend));
  return raw;
}

Status ServerCore::CreateInstances(Model* model) {
  auto& config = model->config;
  if (config.instance_group_size() == 0) {
    if (!model->backend->preferred_groups.empty()) {
      for (const auto& pg : model->backend->preferred_groups) {
        auto* g = config.add_instance_group();
        g->set_kind(FromApiKind(pg.kind));
        g->set_count(static_cast<int32_t>(pg.count));
        for (uint64_t id : pg.device_ids) g->add_gpus(static_cast<int32_t>(id));
      }
    } else {
      config.add_instance_group()->set_kind(num_gpus_ > 0
                                                ? inference::ModelInstanceGroup::KIND_GPU
                                                : inference::ModelInstanceGroup::KIND_CPU);
    }
  }
  for (int gi = 0; gi < config.instance_group_size(); ++gi) {
    auto* group = config.mutable_instance_group(gi);
    if (group->name().empty()) group->set_name(model->name + "_" + std::to_string(gi));
    if (group->count() < 1) group->set_count(1);
    if (group->kind() == inference::ModelInstanceGroup::KIND_AUTO) {
      group->set_kind(num_gpus_ > 0 ? inference::ModelInstanceGroup::KIND_GPU
                                    : inference::ModelInstanceGroup::KIND_CPU);
    }
    std::vector<int32_t> devices = {0};
    if (group->kind() == inference::ModelInstanceGroup::KIND_GPU) {
      if (group->gpus_size() > 0) {
        devices.assign(group->gpus().begin(), group->gpus().end());
      } else {
        // NOTE: a machine without GPUs still runs KIND_GPU groups, as device 0, so that CPU
        // builds of GPU backends can be tested with the configs they ship.
        devices.clear();
        for (int d = 0; d < std::max(1, num_gpus_); ++d) devices.push_back(d);
        for (int32_t d : devices) group->add_gpus(d);
      }
    }
    int index = 0;
    for (int32_t device : devices) {
      for (int c = 0; c < group->count(); ++c) {
        auto instance = std::make_unique<ModelInstance>();
        instance->name = group->name() + "_" + std::to_string(index++);
        instance->kind = ToApiKind(group->kind());
        instance->device_id = device;
        instance->passive = group->passive();
        instance->model = model;
        model->instances.push_back(std::move(instance));
      }
    }
  }
  const auto& lib = *model->backend->library;
  for (auto& instance : model->instances) {
    auto* handle = ToHandle<TRITONBACKEND_ModelInstance>(instance.get());
    if (lib.instance_initialize != nullptr) {
      Status st = TakeTritonError(lib.instance_initialize(handle));
      if (!st.ok()) {
        return Status(st.code(),
                      "instance '" + instance->name + "' failed to initialize: " + st.message());
      }
    }
    instance->initialized = true;
    if (lib.instance_ready != nullptr) {
      Status st = TakeTritonError(lib.instance_ready(handle));
      if (!st.ok()) {
        return Status(st.code(), "instance '" + instance->name + "' is not ready: " + st.message());
      }
    }
  }
  return Status::Ok();
}

Status ServerCore::LoadBackendModel(const ModelEntry& entry, VersionEntry& v) {
  const RepositoryModel& repo = entry.repo;
  std::string backend_name = repo.config.backend();
  if (backend_name.empty()) backend_name = BackendForPlatform(repo.config.platform());
  if (backend_name.empty()) {
    return InvalidArgument("model '" + repo.name +
                           "' names no backend (backend: \"...\") or "
                           "platform in its config.pbtxt");
  }
  ASSIGN_OR_RETURN(Backend * backend, GetBackend(backend_name, repo, v.version));

  auto model = std::make_unique<Model>();
  model->name = repo.name;
  model->version = v.version;
  model->path = repo.path;
  model->config = repo.config;
  if (model->config.backend().empty()) model->config.set_backend(backend_name);
  model->backend = backend;
  model->server = this;
  model->decoupled = model->config.model_transaction_policy().decoupled();
  Model* raw = model.get();
  v.model = std::move(model);

  const auto& lib = *backend->library;
  if (lib.model_initialize != nullptr) {
    Status st = TakeTritonError(lib.model_initialize(ToHandle<TRITONBACKEND_Model>(raw)));
    if (!st.ok()) return st;
  }
  raw->initialized = true;
  raw->decoupled = raw->config.model_transaction_policy().decoupled();  // SetConfig may change it
  Status st = CreateInstances(raw);
  if (!st.ok()) {
    UnloadBackendModel(raw);
    return st;
  }
  raw->scheduler = std::make_unique<InstanceScheduler>(raw);
  raw->scheduler->Start();
  return Status::Ok();
}

Status ServerCore::LoadEnsembleModel(const ModelEntry& entry, VersionEntry& v) {
  const RepositoryModel& repo = entry.repo;
  std::vector<EnsembleStep> steps;
  bool any_decoupled = false;
  for (const auto& spec : repo.config.ensemble_scheduling().step()) {
    auto found = FindReady(spec.model_name(), spec.model_version());
    if (!found.ok()) {
      return Unavailable("ensemble '" + repo.name + "' depends on '" + spec.model_name() +
                         "', which is not available: " + found.status().message());
    }
    EnsembleStep step;
    step.spec = spec;
    step.model_config = found.value()->model->config;
    step.decoupled = found.value()->model->decoupled;
    any_decoupled = any_decoupled || step.decoupled;
    steps.push_back(std::move(step));
  }
  if (steps.empty()) {
    return InvalidArgument("ensemble '" + repo.name + "' has no ensemble_scheduling steps");
  }
  RETURN_IF_ERROR(ValidateEnsemble(repo.config, steps));
  auto model = std::make_unique<Model>();
  model->name = repo.name;
  model->version = v.version;
  model->path = repo.path;
  model->config = repo.config;
  model->server = this;
  model->decoupled = repo.config.model_transaction_policy().decoupled() || any_decoupled;
  v.ensemble = std::make_unique<EnsembleScheduler>(
      model.get(), std::move(steps), [this](InferRequest request, ResponseCallback callback) {
        return InferInternal(std::move(request), std::move(callback));
      });
  v.model = std::move(model);
  return Status::Ok();
}

void ServerCore::UnloadBackendModel(Model* model) {
  if (model->scheduler) model->scheduler->Stop();
  const auto& lib = *model->backend->library;
  for (auto& instance : model->instances) {
    if (instance->initialized && lib.instance_finalize != nullptr) {
      Status st = TakeTritonError(
          lib.instance_finalize(ToHandle<TRITONBACKEND_ModelInstance>(instance.get())));
      if (!st.ok()) LOG_ERROR("instance '{}' failed to finalize: {}", instance->name, st.message());
    }
    instance->initialized = false;
  }
  if (model->initialized && lib.model_finalize != nullptr) {
    Status st = TakeTritonError(lib.model_finalize(ToHandle<TRITONBACKEND_Model>(model)));
    if (!st.ok()) LOG_ERROR("model '{}' failed to finalize: {}", model->name, st.message());
  }
  model->initialized = false;
  // Whatever the backend never completed is answered and freed here, so no client waits forever.
  model->tracker->FailAll(
      Unavailable("model '" + model->name + "' was unloaded before the request completed"));
  for (InferenceRequest* r : model->tracker->TakeUnreleased()) delete r;
}

Result<ServerCore::VersionEntry*> ServerCore::FindReady(const std::string& name,
                                                        int64_t version) const {
  auto it = models_.find(name);
  if (it == models_.end() || !it->second.requested) {
    return NotFound("Request for unknown model: '" + name + "' is not found");
  }
  std::lock_guard lock(state_mu_);
  VersionEntry* best = nullptr;
  for (const auto& v : it->second.versions) {
    if (version >= 0 && v->version != version) continue;
    if (version >= 0 && v->state != State::kReady) {
      return Unavailable("Request for unknown model: '" + name + "' version " +
                         std::to_string(version) + " is not at ready state");
    }
    if (v->state == State::kReady && (best == nullptr || v->version > best->version))
      best = v.get();
  }
  if (best != nullptr) return best;
  if (version >= 0) {
    return NotFound("Request for unknown model: '" + name + "' version " + std::to_string(version) +
                    " is not found");
  }
  return Unavailable("Request for unknown model: '" + name + "' has no available versions");
}

bool ServerCore::IsLive() const {
  return live_.load();
}

bool ServerCore::IsReady() const {
  if (!live_.load() || !accepting_.load()) return false;
  std::lock_guard lock(state_mu_);
  for (const auto& [name, entry] : models_) {
    if (!entry.requested) continue;
    const bool ready = std::any_of(entry.versions.begin(), entry.versions.end(),
                                   [](const auto& v) { return v->state == State::kReady; });
    if (!ready) return false;
  }
  return true;
}

bool ServerCore::ModelIsReady(const std::string& name, std::int64_t version) const {
  return FindReady(name, version).ok();
}

std::vector<ModelIndexEntry> ServerCore::ModelIndex() const {
  std::vector<ModelIndexEntry> out;
  std::lock_guard lock(state_mu_);
  for (const auto& [name, entry] : models_) {
    if (!entry.requested) {
      out.push_back({name, "", "UNAVAILABLE", "unloaded"});
      continue;
    }
    for (const auto& v : entry.versions) {
      ModelIndexEntry e;
      e.name = name;
      e.version = v->version >= 0 ? std::to_string(v->version) : "";
      e.state = v->state == State::kReady     ? "READY"
                : v->state == State::kLoading ? "LOADING"
                                              : "UNAVAILABLE";
      e.reason = v->reason;
      out.push_back(std::move(e));
    }
  }
  return out;
}

Result<ModelMetadata> ServerCore::GetModelMetadata(const std::string& name,
                                                   std::int64_t version) const {
  ASSIGN_OR_RETURN(VersionEntry * v, FindReady(name, version));
  const Model& model = *v->model;
  ModelMetadata md;
  md.name = name;
  {
    std::lock_guard lock(state_mu_);
    for (const auto& other : models_.at(name).versions) {
      if (other->state == State::kReady) md.versions.push_back(std::to_string(other->version));
    }
  }
  md.platform = v->ensemble ? "ensemble" : model.config.backend();
  md.inputs = TensorsMetadata(model.config, true);
  md.outputs = TensorsMetadata(model.config, false);
  return md;
}

Result<std::string> ServerCore::GetModelConfigJson(const std::string& name,
                                                   std::int64_t version) const {
  ASSIGN_OR_RETURN(VersionEntry * v, FindReady(name, version));
  return config::ModelConfigToJson(v->model->config);
}

Result<bool> ServerCore::ModelIsDecoupled(const std::string& name, std::int64_t version) const {
  ASSIGN_OR_RETURN(VersionEntry * v, FindReady(name, version));
  return v->model->decoupled;
}

Result<std::int64_t> ServerCore::ModelMaxBatchSize(const std::string& name,
                                                   std::int64_t version) const {
  ASSIGN_OR_RETURN(VersionEntry * v, FindReady(name, version));
  return static_cast<std::int64_t>(v->model->config.max_batch_size());
}

Result<std::shared_ptr<InflightRequest>> ServerCore::Infer(InferRequest request,
                                                           ResponseCallback callback) {
  if (!accepting_.load()) {
    return Unavailable("server is shutting down: new requests are rejected");
  }
  return InferInternal(std::move(request), std::move(callback));
}

Result<std::shared_ptr<InflightRequest>> ServerCore::InferInternal(InferRequest request,
                                                                   ResponseCallback callback) {
  ASSIGN_OR_RETURN(VersionEntry * v, FindReady(request.model_name, request.model_version));
  Model* model = v->model.get();
  const uint64_t start_ns = NowNs();
  auto batch_size = ValidateInferRequest(model->config, request);
  if (!batch_size.ok()) {
    model->stats->ReportOutcome(false, start_ns, NowNs());
    return batch_size.status();
  }
  if (v->ensemble) return v->ensemble->Infer(std::move(request), std::move(callback));

  ChannelInfo info;
  info.model_name = model->name;
  info.model_version = model->version;
  info.request_id = request.id;
  info.decoupled = model->decoupled;
  info.requested_outputs = request.requested_outputs;
  auto channel = ResponseChannel::Create(std::move(info), std::move(callback), model->tracker);
  auto handle = std::make_shared<ChannelHandle>(channel);
  Status st = model->scheduler->Enqueue(
      BuildInferenceRequest(model, std::move(request), channel, batch_size.value()));
  if (!st.ok()) {
    channel->Disarm();
    model->stats->ReportOutcome(false, start_ns, NowNs(), FailureReason::kRejected);
    return st;
  }
  return std::static_pointer_cast<InflightRequest>(handle);
}

std::vector<Model*> ServerCore::AllModels(bool ready_only) const {
  std::vector<Model*> out;
  std::lock_guard lock(state_mu_);
  for (const auto& [name, entry] : models_) {
    for (const auto& v : entry.versions) {
      if (v->model && (!ready_only || v->state == State::kReady)) out.push_back(v->model.get());
    }
  }
  return out;
}

std::string ServerCore::MetricsText() const {
  struct Family {
    const char* name;
    const char* help;
    const char* type;
    uint64_t (*value)(const ModelStatsSnapshot&);
  };
  static const Family kFamilies[] = {
      {"nv_inference_request_success", "Number of successful inference requests, all batch sizes",
       "counter", [](const ModelStatsSnapshot& s) { return s.success.count; }},
      {"nv_inference_request_failure", "Number of failed inference requests, all batch sizes",
       "counter", [](const ModelStatsSnapshot& s) { return s.fail.count; }},
      {"nv_inference_count", "Number of inferences performed (does not include cached requests)",
       "counter", [](const ModelStatsSnapshot& s) { return s.inference_count; }},
      {"nv_inference_exec_count",
       "Number of model executions performed (does not include cached requests)", "counter",
       [](const ModelStatsSnapshot& s) { return s.execution_count; }},
      {"nv_inference_request_duration_us",
       "Cumulative inference request duration in microseconds (includes cached requests)",
       "counter", [](const ModelStatsSnapshot& s) { return s.success.ns / 1000; }},
      {"nv_inference_queue_duration_us",
       "Cumulative inference queuing duration in microseconds (includes cached requests)",
       "counter", [](const ModelStatsSnapshot& s) { return s.queue.ns / 1000; }},
      {"nv_inference_compute_input_duration_us",
       "Cumulative compute input duration in microseconds (does not include cached requests)",
       "counter", [](const ModelStatsSnapshot& s) { return s.compute_input.ns / 1000; }},
      {"nv_inference_compute_infer_duration_us",
       "Cumulative compute inference duration in microseconds (does not include cached requests)",
       "counter", [](const ModelStatsSnapshot& s) { return s.compute_infer.ns / 1000; }},
      {"nv_inference_compute_output_duration_us",
       "Cumulative inference compute output duration in microseconds (does not include cached "
       "requests)",
       "counter", [](const ModelStatsSnapshot& s) { return s.compute_output.ns / 1000; }},
  };
  std::vector<std::tuple<std::string, std::string, ModelStatsSnapshot, size_t>> rows;
  for (Model* m : AllModels(true)) {
    const size_t pending = m->scheduler ? m->scheduler->QueueSize() : 0;
    rows.emplace_back(m->name, std::to_string(m->version), m->stats->Snapshot(), pending);
  }
  std::ostringstream out;
  for (const auto& f : kFamilies) {
    out << "# HELP " << f.name << " " << f.help << "\n# TYPE " << f.name << " " << f.type << "\n";
    const bool by_reason = std::string_view(f.name) == "nv_inference_request_failure";
    for (const auto& [name, version, snap, pending] : rows) {
      if (!by_reason) {
        out << f.name << FormatLabels({{"model", name}, {"version", version}}) << " "
            << f.value(snap) << "\n";
        continue;
      }
      // As tritonserver 2.68: one series per failure reason, zeros included.
      for (FailureReason reason : kFailureReasons) {
        auto it = snap.failures.find(reason);
        out << f.name
            << FormatLabels(
                   {{"model", name}, {"reason", FailureReasonName(reason)}, {"version", version}})
            << " " << (it == snap.failures.end() ? 0 : it->second) << "\n";
      }
    }
  }
  out << "# HELP nv_inference_pending_request_count Instantaneous number of pending requests "
         "awaiting execution per-model.\n# TYPE nv_inference_pending_request_count gauge\n";
  for (const auto& [name, version, snap, pending] : rows) {
    out << "nv_inference_pending_request_count"
        << FormatLabels({{"model", name}, {"version", version}}) << " " << pending << "\n";
  }
  out << MetricsRegistry::Global().RenderPrometheus();
  return out.str();
}

Result<std::string> ServerCore::ModelStatisticsJson(const std::string& name) const {
  nlohmann::json stats = nlohmann::json::array();
  if (!name.empty()) {
    auto it = models_.find(name);
    if (it == models_.end() || !it->second.requested) {
      return NotFound("Request for unknown model: '" + name + "' is not found");
    }
  }
  for (Model* m : AllModels(true)) {
    if (!name.empty() && m->name != name) continue;
    stats.push_back(m->stats->ToJson(m->name, std::to_string(m->version)));
  }
  return nlohmann::json{{"model_stats", stats}}.dump();
}

void ServerCore::Shutdown() {
  std::lock_guard lock(shutdown_mu_);
  if (shut_down_) return;
  accepting_ = false;
  const auto timeout = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::max(0.0, options_.exit_timeout_secs)));
  const std::vector<Model*> models = AllModels(false);
  auto wait_idle = [&](std::chrono::steady_clock::time_point deadline) {
    bool idle = true;
    for (Model* m : models) idle = m->tracker->WaitIdle(deadline) && idle;
    return idle;
  };
  if (!wait_idle(std::chrono::steady_clock::now() + timeout)) {
    size_t inflight = 0;
    std::string where;  // which models hold them, for whoever reads why a stop took this long
    for (Model* m : models) {
      const size_t n = m->tracker->NumInflight();
      if (n == 0) continue;
      inflight += n;
      where += (where.empty() ? "" : ", ") + m->name + ": " + std::to_string(n);
    }
    LOG_WARN("shutdown: {} request(s) still in flight after {} s; cancelling them ({})", inflight,
             options_.exit_timeout_secs, where);
    for (Model* m : models) m->tracker->CancelAll();
    wait_idle(std::chrono::steady_clock::now() + timeout);
  }
  // Backend models first (their failures reach the ensembles that wait on them), then ensembles.
  for (Model* m : models) {
    if (m->backend != nullptr) UnloadBackendModel(m);
  }
  for (Model* m : models) {
    if (m->backend == nullptr) {
      m->tracker->FailAll(Unavailable("ensemble '" + m->name + "' was unloaded"));
    }
  }
  {
    std::lock_guard state_lock(state_mu_);
    for (auto& [name, entry] : models_) {
      for (auto& v : entry.versions) {
        if (v->state == State::kReady) {
          v->state = State::kUnavailable;
          v->reason = "unloaded";
        }
      }
    }
  }
  for (auto& [name, backend] : backends_) {
    if (backend->initialized && backend->library->finalize != nullptr) {
      Status st = TakeTritonError(
          backend->library->finalize(ToHandle<TRITONBACKEND_Backend>(backend.get())));
      if (!st.ok()) LOG_ERROR("backend '{}' failed to finalize: {}", name, st.message());
    }
    backend->initialized = false;
    backend->library.reset();  // dlclose
  }
  live_ = false;
  shut_down_ = true;
}

}  // namespace inflight::server
