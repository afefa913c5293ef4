// Scans model repository folders: <repo>/<model>/config.pbtxt and numeric version folders.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model_config.pb.h"

namespace inflight::server {

struct RepositoryModel {
  std::string name;               // the folder name
  std::string repository;         // the repository root it came from
  std::string path;               // <repository>/<name>
  inference::ModelConfig config;  // valid only when error is empty
  std::vector<int64_t> versions;  // chosen by the version policy, ascending
  std::string error;              // why the model cannot load (config or versions)
  bool IsEnsemble() const { return config.platform() == "ensemble"; }
};

// Every sub-folder of every repository is a model. A repository that cannot be read is an error; a
// model with a bad config is returned with `error` set. The config's name defaults to the folder's.
Result<std::vector<RepositoryModel>> ScanRepositories(const std::vector<std::string>& repositories);

// Triton's version_policy: latest (num_versions, default 1), all, or specific versions.
std::vector<int64_t> SelectVersions(const inference::ModelConfig& config,
                                    std::vector<int64_t> available);

}  // namespace inflight::server
