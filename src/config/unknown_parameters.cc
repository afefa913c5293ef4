#include "config/unknown_parameters.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "common/logging.h"

namespace inflight::config {

size_t EditDistance(std::string_view a, std::string_view b) {
  // One row of the dynamic-programming table at a time: row[j] is the distance between the first
  // i bytes of a and the first j bytes of b.
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];  // distance(a[0, i-1), b[0, j-1))
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> NearestKey(std::string_view key, const std::vector<std::string>& known) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& candidate : known) {
    const size_t d = EditDistance(key, candidate);
    if (!best || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

std::vector<std::string> UnknownParameterWarnings(const inference::ModelConfig& config,
                                                  const std::vector<std::string>& known) {
  const std::set<std::string_view> known_set(known.begin(), known.end());
  // NOTE: protobuf maps iterate in no fixed order; sort so the lines come out the same each load.
  std::map<std::string, bool> keys;
  for (const auto& [key, value] : config.parameters()) keys.emplace(key, true);
  std::vector<std::string> warnings;
  for (const auto& [key, unused] : keys) {
    if (known_set.count(key) != 0) continue;
    std::string line =
        "model '" + config.name() + "': unknown parameter \"" + key + "\" is ignored";
    if (auto nearest = NearestKey(key, known)) {
      line += "; the nearest known key is \"" + *nearest + "\"";
    }
    warnings.push_back(std::move(line));
  }
  return warnings;
}

void WarnUnknownParameters(const inference::ModelConfig& config,
                           const std::vector<std::string>& known) {
  static std::mutex mu;
  static std::set<std::string> warned;  // the warning lines already logged
  for (std::string& line : UnknownParameterWarnings(config, known)) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!warned.insert(line).second) continue;
    }
    LOG_WARN("{}", line);
  }
}

}  // namespace inflight::config
