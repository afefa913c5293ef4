// The loading half of ServerCore: the repository read at start-up, each model's backend found and
// initialised, its instances created as the config's instance groups ask, ensembles assembled from
// their steps, and a model's unloading. server_core.cc holds the serving half.
#include "server/server_core.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "server/inference_request.h"
#include "server/instance_scheduler.h"
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

}  // namespace

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

}  // namespace inflight::server
