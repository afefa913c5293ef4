// ServerCore: the Server of server_api.h. Owns the repository's models, the loaded backends, their
// schedulers and the ensemble schedulers. The set of models is fixed once Create returns (no
// load/unload API yet), so lookups need no lock; state changes (shutdown) go through state_mu_.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/backend_objects.h"
#include "server/ensemble_scheduler.h"
#include "server/model_repository.h"
#include "server/server_api.h"

namespace inflight::server {

class ServerCore final : public Server {
 public:
  explicit ServerCore(ServerOptions options);
  ~ServerCore() override;

  // Scans the repositories and loads the models; fails only when a repository cannot be read.
  Status Load();

  bool IsLive() const override;
  bool IsReady() const override;
  bool ModelIsReady(const std::string& name, std::int64_t version) const override;
  std::vector<ModelIndexEntry> ModelIndex() const override;
  Result<ModelMetadata> GetModelMetadata(const std::string& name,
                                         std::int64_t version) const override;
  Result<std::string> GetModelConfigJson(const std::string& name,
                                         std::int64_t version) const override;
  Result<bool> ModelIsDecoupled(const std::string& name, std::int64_t version) const override;
  Result<std::int64_t> ModelMaxBatchSize(const std::string& name,
                                         std::int64_t version) const override;
  Result<std::shared_ptr<InflightRequest>> Infer(InferRequest request,
                                                 ResponseCallback callback) override;
  std::string MetricsText() const override;
  Result<std::string> ModelStatisticsJson(const std::string& name) const override;
  void Shutdown() override;

 private:
  enum class State { kLoading, kReady, kUnavailable };
  struct VersionEntry {
    int64_t version = 0;
    State state = State::kLoading;  // guarded by state_mu_
    std::string reason;             // guarded by state_mu_
    std::unique_ptr<Model> model;   // set once loaded; lives until ~ServerCore
    std::unique_ptr<EnsembleScheduler> ensemble;
  };
  struct ModelEntry {
    RepositoryModel repo;
    bool requested = true;
    std::vector<std::unique_ptr<VersionEntry>> versions;
  };

  void LoadEntry(ModelEntry& entry);
  Status LoadBackendModel(const ModelEntry& entry, VersionEntry& v);
  Status LoadEnsembleModel(const ModelEntry& entry, VersionEntry& v);
  Result<Backend*> GetBackend(const std::string& name, const RepositoryModel& repo,
                              int64_t version);
  std::string BackendConfigJson(const std::string& backend) const;
  Status CreateInstances(Model* model);
  void UnloadBackendModel(Model* model);
  void SetState(VersionEntry& v, State state, std::string reason);

  // Model lookup with Triton's messages; `version` -1 = the latest ready version.
  Result<VersionEntry*> FindReady(const std::string& name, int64_t version) const;
  // Infer without the "accepting" check: ensembles launch their steps through it during shutdown's
  // grace period.
  Result<std::shared_ptr<InflightRequest>> InferInternal(InferRequest request,
                                                         ResponseCallback callback);
  // Every model object (ready_only: only versions now READY).
  std::vector<Model*> AllModels(bool ready_only) const;

  const ServerOptions options_;
  int num_gpus_ = 0;
  std::map<std::string, std::unique_ptr<Backend>> backends_;
  std::map<std::string, Status> backend_failures_;
  std::map<std::string, ModelEntry> models_;

  mutable std::mutex state_mu_;
  std::atomic<bool> accepting_{false};
  std::atomic<bool> live_{true};
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

}  // namespace inflight::server
