#include "server/server_core.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "config/model_config_loader.h"
#include "server/inference_request.h"
#include "server/instance_scheduler.h"
#include "server/metrics_registry.h"
#include "server/request_validation.h"

namespace inflight::server {

namespace {

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
