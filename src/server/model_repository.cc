#include "server/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "config/model_config_loader.h"

namespace inflight::server {

namespace fs = std::filesystem;

namespace {

bool ParseVersion(const std::string& name, int64_t* version) {
  if (name.empty() || name.size() > 18) return false;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
  }
  *version = std::stoll(name);
  return true;
}

std::string VersionList(const std::vector<int64_t>& versions) {
  std::string out;
  for (int64_t v : versions) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out.empty() ? "none" : out;
}

RepositoryModel ScanModel(const fs::path& repo, const fs::path& dir) {
  RepositoryModel m;
  m.name = dir.filename().string();
  m.repository = repo.string();
  m.path = dir.string();
  const fs::path config_path = dir / "config.pbtxt";
  std::error_code ec;
  if (!fs::exists(config_path, ec)) {
    m.error = "model '" + m.name + "' has no config.pbtxt in " + m.path;
    return m;
  }
  auto config = config::LoadModelConfigFile(config_path.string());
  if (!config.ok()) {
    m.error =
        "failed to parse the configuration of model '" + m.name + "': " + config.status().message();
    return m;
  }
  m.config = std::move(config).value();
  if (m.config.name().empty()) m.config.set_name(m.name);
  if (m.config.name() != m.name) {
    m.error = "model name '" + m.config.name() + "' in " + config_path.string() +
              " does not match its folder name '" + m.name + "'";
    return m;
  }
  std::vector<int64_t> available;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    int64_t v = 0;
    if (entry.is_directory() && ParseVersion(entry.path().filename().string(), &v)) {
      available.push_back(v);
    }
  }
  std::sort(available.begin(), available.end());
  if (available.empty() && m.IsEnsemble()) available.push_back(1);  // ensembles have no files
  m.versions = SelectVersions(m.config, available);
  if (m.versions.empty()) {
    m.error = "at least one version must be available under the version policy of model '" +
              m.name + "' (version folders found: " + VersionList(available) + ")";
  }
  return m;
}

}  // namespace

std::vector<int64_t> SelectVersions(const inference::ModelConfig& config,
                                    std::vector<int64_t> available) {
  std::sort(available.begin(), available.end());
  const auto& policy = config.version_policy();
  if (policy.has_all()) return available;
  if (policy.has_specific()) {
    std::vector<int64_t> out;
    for (int64_t v : policy.specific().versions()) {
      if (std::binary_search(available.begin(), available.end(), v)) out.push_back(v);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  const size_t n = std::max<uint32_t>(1, policy.latest().num_versions());
  if (available.size() > n) available.erase(available.begin(), available.end() - n);
  return available;
}

Result<std::vector<RepositoryModel>> ScanRepositories(
    const std::vector<std::string>& repositories) {
  std::vector<RepositoryModel> models;
  std::map<std::string, size_t> by_name;
  for (const auto& repo : repositories) {
    std::error_code ec;
    if (!fs::is_directory(repo, ec)) {
      return InvalidArgument("model repository '" + repo + "' is not a directory");
    }
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::directory_iterator(repo, ec)) {
      if (entry.is_directory() && entry.path().filename().string()[0] != '.') {
        dirs.push_back(entry.path());
      }
    }
    if (ec) return InvalidArgument("cannot read model repository '" + repo + "': " + ec.message());
    std::sort(dirs.begin(), dirs.end());
    for (const auto& dir : dirs) {
      RepositoryModel m = ScanModel(repo, dir);
      auto it = by_name.find(m.name);
      if (it != by_name.end()) {
        models[it->second].error = "model '" + m.name + "' appears in more than one repository (" +
                                   models[it->second].repository + " and " + m.repository + ")";
        continue;
      }
      by_name[m.name] = models.size();
      models.push_back(std::move(m));
    }
  }
  return models;
}

}  // namespace inflight::server
