#include "config/parameters.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <utility>

#include "common/logging.h"

namespace inflight::config {
namespace {

std::string_view Trim(std::string_view s) {
  auto is_blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

Status InvalidValue(std::string_view key, std::string_view value, std::string_view expected) {
  return InvalidArgument("Invalid value \"" + std::string(value) + "\" for parameter " +
                         std::string(key) + ": expected " + std::string(expected));
}

// NOTE: one line per (model, key) for the whole process, so that reloading a model or creating
// several instances does not repeat it. Only logging reads this set.
bool FirstTimeFor(const std::string& model, const std::string& key) {
  static std::mutex mu;
  static std::set<std::pair<std::string, std::string>> seen;
  std::lock_guard<std::mutex> lock(mu);
  return seen.emplace(model, key).second;
}

Result<std::vector<int32_t>> ParseIntItems(std::string_view key, std::string_view whole,
                                           std::string_view list) {
  std::vector<int32_t> out;
  std::string_view rest = list;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = Trim(rest.substr(0, comma));
    bool last = comma == std::string_view::npos;
    if (item.empty()) {
      // Only a trailing comma after at least one item is tolerated.
      if (last && !out.empty()) break;
      return InvalidValue(key, whole, "a comma-separated list of integers");
    }
    int32_t v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size()) {
      return InvalidValue(key, whole, "a comma-separated list of integers");
    }
    out.push_back(v);
    if (last) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

}  // namespace

bool IsUnfilledPlaceholder(std::string_view value) {
  value = Trim(value);
  return value.size() >= 4 && value.substr(0, 2) == "${" && value.back() == '}' &&
         value.find('}') == value.size() - 1;
}

std::optional<std::string> GetParameter(const inference::ModelConfig& config,
                                        const std::string& key, std::string_view default_text) {
  auto it = config.parameters().find(key);
  std::string_view value;
  if (it != config.parameters().end()) value = it->second.string_value();
  if (!Trim(value).empty() && !IsUnfilledPlaceholder(value)) return std::string(value);
  if (FirstTimeFor(config.name(), key)) {
    std::string why = it == config.parameters().end() ? "absent"
                      : Trim(value).empty()           ? "empty"
                                                      : "unfilled (" + std::string(value) + ")";
    if (default_text.empty()) {
      LOG_INFO("model '{}': parameter {} is {}; using its default", config.name(), key, why);
    } else {
      LOG_INFO("model '{}': parameter {} is {}; using its default ({})", config.name(), key, why,
               default_text);
    }
  }
  return std::nullopt;
}

Result<bool> ParseBoolValue(std::string_view key, std::string_view value) {
  std::string v = Lower(Trim(value));
  if (v == "true" || v == "yes" || v == "1") return true;
  if (v == "false" || v == "no" || v == "0") return false;
  return InvalidValue(key, value, "true or false");
}

Result<int64_t> ParseIntValue(std::string_view key, std::string_view value) {
  std::string_view v = Trim(value);
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  int64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
    return InvalidValue(key, value, "an integer");
  }
  return out;
}

Result<double> ParseFloatValue(std::string_view key, std::string_view value) {
  std::string_view v = Trim(value);
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  double out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || !std::isfinite(out)) {
    return InvalidValue(key, value, "a number");
  }
  return out;
}

Result<std::optional<bool>> GetBoolParameter(const inference::ModelConfig& config,
                                             const std::string& key) {
  auto value = GetParameter(config, key);
  if (!value) return std::optional<bool>();
  ASSIGN_OR_RETURN(bool v, ParseBoolValue(key, *value));
  return std::optional<bool>(v);
}

Result<std::optional<int64_t>> GetIntParameter(const inference::ModelConfig& config,
                                               const std::string& key) {
  auto value = GetParameter(config, key);
  if (!value) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t v, ParseIntValue(key, *value));
  return std::optional<int64_t>(v);
}

Result<std::optional<double>> GetFloatParameter(const inference::ModelConfig& config,
                                                const std::string& key) {
  auto value = GetParameter(config, key);
  if (!value) return std::optional<double>();
  ASSIGN_OR_RETURN(double v, ParseFloatValue(key, *value));
  return std::optional<double>(v);
}

Result<std::vector<int32_t>> ParseCsvInts(std::string_view key, std::string_view value) {
  return ParseIntItems(key, value, value);
}

Result<std::vector<std::vector<int32_t>>> ParseCsvIntGroups(std::string_view key,
                                                            std::string_view value) {
  constexpr std::string_view kExpected = "groups of integers such as {1,5},{1,2,3}";
  std::vector<std::vector<int32_t>> out;
  std::string_view rest = Trim(value);
  while (!rest.empty()) {
    if (rest.front() != '{') return InvalidValue(key, value, kExpected);
    size_t close = rest.find('}');
    if (close == std::string_view::npos) return InvalidValue(key, value, kExpected);
    auto group = ParseIntItems(key, value, rest.substr(1, close - 1));
    if (!group.ok()) return InvalidValue(key, value, kExpected);
    out.push_back(std::move(group).value());
    rest = Trim(rest.substr(close + 1));
    if (rest.empty()) break;
    if (rest.front() != ',') return InvalidValue(key, value, kExpected);
    rest = Trim(rest.substr(1));
  }
  if (out.empty()) return InvalidValue(key, value, kExpected);
  return out;
}

Result<std::vector<std::vector<int32_t>>> ParseDeviceIdGroups(std::string_view key,
                                                              std::string_view value) {
  constexpr std::string_view kExpected = "device ids such as 0,1;2,3 (';' between instances)";
  std::vector<std::vector<int32_t>> out;
  std::string_view rest = value;
  while (true) {
    size_t semicolon = rest.find(';');
    auto group = ParseIntItems(key, value, rest.substr(0, semicolon));
    if (!group.ok()) return InvalidValue(key, value, kExpected);
    for (int32_t id : group.value()) {
      if (id < 0) return InvalidValue(key, value, kExpected);
    }
    out.push_back(std::move(group).value());
    if (semicolon == std::string_view::npos) break;
    rest = rest.substr(semicolon + 1);
  }
  return out;
}

}  // namespace inflight::config
