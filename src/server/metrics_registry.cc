#include "server/metrics_registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/logging.h"

namespace inflight::server {

namespace {

const char* KindName(TRITONSERVER_MetricKind kind) {
  switch (kind) {
    case TRITONSERVER_METRIC_KIND_COUNTER:
      return "counter";
    case TRITONSERVER_METRIC_KIND_GAUGE:
      return "gauge";
    case TRITONSERVER_METRIC_KIND_HISTOGRAM:
      return "histogram";
  }
  return "untyped";
}

const char* ApiKindName(TRITONSERVER_MetricKind kind) {
  switch (kind) {
    case TRITONSERVER_METRIC_KIND_COUNTER:
      return "TRITONSERVER_METRIC_KIND_COUNTER";
    case TRITONSERVER_METRIC_KIND_GAUGE:
      return "TRITONSERVER_METRIC_KIND_GAUGE";
    case TRITONSERVER_METRIC_KIND_HISTOGRAM:
      return "TRITONSERVER_METRIC_KIND_HISTOGRAM";
  }
  return "<unknown kind>";
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string EscapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

bool ValidMetricName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
                    (i > 0 && std::isdigit(static_cast<unsigned char>(c)));
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<long long>(value));
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  return buf;
}

std::string FormatLabels(const MetricLabels& labels, const std::string& extra_key,
                         const std::string& extra_value) {
  if (labels.empty() && extra_key.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    out += (first ? "" : ",") + k + "=\"" + EscapeLabelValue(v) + "\"";
    first = false;
  }
  if (!extra_key.empty()) out += (first ? "" : ",") + extra_key + "=\"" + extra_value + "\"";
  return out + "}";
}

MetricsRegistry& MetricsRegistry::Global() {
  static MetricsRegistry* registry =
      new MetricsRegistry();  // never destroyed: backends may outlive
  return *registry;
}

Result<MetricFamilyHandle*> MetricsRegistry::NewFamily(TRITONSERVER_MetricKind kind,
                                                       const std::string& name,
                                                       const std::string& description) {
  if (kind != TRITONSERVER_METRIC_KIND_COUNTER && kind != TRITONSERVER_METRIC_KIND_GAUGE &&
      kind != TRITONSERVER_METRIC_KIND_HISTOGRAM) {
    return InvalidArgument("metric family '" + name + "': unknown kind " +
                           std::to_string(static_cast<int>(kind)));
  }
  if (!ValidMetricName(name)) {
    return InvalidArgument("metric family name '" + name +
                           "' is not a valid Prometheus name ([a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    if (it->second->kind != kind) {
      return InvalidArgument("metric family '" + name + "' already exists with kind " +
                             ApiKindName(it->second->kind) + "; cannot create it as " +
                             ApiKindName(kind));
    }
    ++it->second->num_handles;
    return new MetricFamilyHandle{it->second};
  }
  auto family = std::make_shared<MetricFamilyData>();
  family->kind = kind;
  family->name = name;
  family->description = description;
  family->num_handles = 1;
  families_[name] = family;
  return new MetricFamilyHandle{family};
}

Status MetricsRegistry::DeleteFamily(MetricFamilyHandle* handle) {
  if (handle == nullptr) return InvalidArgument("TRITONSERVER_MetricFamilyDelete: null family");
  {
    std::lock_guard lock(mu_);
    auto& family = handle->family;
    if (--family->num_handles == 0) {
      if (!family->series.empty()) {
        // As Triton: deleting a family before its metrics is a backend bug; those metrics stop
        // working rather than keep a dead family alive.
        LOG_WARN(
            "metric family '{}' deleted while {} of its metrics still exist; delete metrics "
            "before their family",
            family->name, family->series.size());
      }
      family->alive = false;
      family->series.clear();
      families_.erase(family->name);
    }
  }
  delete handle;
  return Status::Ok();
}

Result<MetricHandle*> MetricsRegistry::NewMetric(MetricFamilyHandle* family_handle,
                                                 MetricLabels labels, const MetricArgsData* args) {
  if (family_handle == nullptr) return InvalidArgument("TRITONSERVER_MetricNew: null family");
  std::sort(labels.begin(), labels.end());
  std::lock_guard lock(mu_);
  auto family = family_handle->family;
  if (!family->alive) {
    return InvalidArgument("metric family '" + family->name + "' was deleted");
  }
  const bool histogram = family->kind == TRITONSERVER_METRIC_KIND_HISTOGRAM;
  const bool has_buckets = args != nullptr && args->has_histogram;
  if (histogram && !has_buckets) {
    return InvalidArgument("metric family '" + family->name +
                           "' is a histogram: create its metrics with "
                           "TRITONSERVER_MetricNewWithArgs and histogram buckets");
  }
  if (!histogram && has_buckets) {
    return InvalidArgument("metric family '" + family->name + "' is a " + KindName(family->kind) +
                           ": histogram buckets apply only to TRITONSERVER_METRIC_KIND_HISTOGRAM");
  }
  if (has_buckets) {
    for (size_t i = 1; i < args->buckets.size(); ++i) {
      if (!(args->buckets[i - 1] < args->buckets[i])) {
        return InvalidArgument("histogram buckets of metric family '" + family->name +
                               "' must be strictly increasing; bucket " + std::to_string(i) +
                               " is " + FormatMetricValue(args->buckets[i]) + " after " +
                               FormatMetricValue(args->buckets[i - 1]));
      }
    }
  }
  const std::string key = FormatLabels(labels);
  auto& series = family->series[key];
  if (!series) {
    series = std::make_shared<MetricSeries>();
    series->labels = std::move(labels);
    if (has_buckets) {
      series->bounds = args->buckets;
      series->bucket_counts.assign(args->buckets.size() + 1, 0);
    }
  }
  ++series->num_handles;
  return new MetricHandle{family, series};
}

Status MetricsRegistry::DeleteMetric(MetricHandle* metric) {
  if (metric == nullptr) return InvalidArgument("TRITONSERVER_MetricDelete: null metric");
  {
    std::lock_guard lock(mu_);
    if (--metric->series->num_handles == 0 && metric->family->alive) {
      metric->family->series.erase(FormatLabels(metric->series->labels));
    }
  }
  delete metric;
  return Status::Ok();
}

Status MetricsRegistry::CheckAlive(const MetricHandle* metric) const {
  if (metric == nullptr) return InvalidArgument("null metric");
  if (!metric->family->alive) {
    return InvalidArgument("metric of family '" + metric->family->name +
                           "' is no longer valid: its family was deleted");
  }
  return Status::Ok();
}

Result<double> MetricsRegistry::Value(MetricHandle* metric) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(CheckAlive(metric));
  if (metric->family->kind == TRITONSERVER_METRIC_KIND_HISTOGRAM) {
    return Unsupported("TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value");
  }
  return metric->series->value;
}

Status MetricsRegistry::Increment(MetricHandle* metric, double value) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(CheckAlive(metric));
  switch (metric->family->kind) {
    case TRITONSERVER_METRIC_KIND_COUNTER:
      if (value < 0.0) {
        return InvalidArgument(
            "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by "
            "non-negative values; got " +
            FormatMetricValue(value));
      }
      metric->series->value += value;
      return Status::Ok();
    case TRITONSERVER_METRIC_KIND_GAUGE:
      metric->series->value += value;
      return Status::Ok();
    default:
      return Unsupported(std::string(ApiKindName(metric->family->kind)) +
                         " does not support Increment");
  }
}

Status MetricsRegistry::Set(MetricHandle* metric, double value) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(CheckAlive(metric));
  if (metric->family->kind != TRITONSERVER_METRIC_KIND_GAUGE) {
    return Unsupported(std::string(ApiKindName(metric->family->kind)) + " does not support Set");
  }
  metric->series->value = value;
  return Status::Ok();
}

Status MetricsRegistry::Observe(MetricHandle* metric, double value) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(CheckAlive(metric));
  if (metric->family->kind != TRITONSERVER_METRIC_KIND_HISTOGRAM) {
    return Unsupported(std::string(ApiKindName(metric->family->kind)) +
                       " does not support Observe");
  }
  auto& s = *metric->series;
  const size_t bucket =
      std::lower_bound(s.bounds.begin(), s.bounds.end(), value) - s.bounds.begin();
  ++s.bucket_counts[bucket];
  s.sum += value;
  ++s.count;
  return Status::Ok();
}

TRITONSERVER_MetricKind MetricsRegistry::Kind(MetricHandle* metric) {
  return metric->family->kind;
}

std::string MetricsRegistry::RenderPrometheus() const {
  std::lock_guard lock(mu_);
  std::ostringstream out;
  for (const auto& [name, family] : families_) {
    out << "# HELP " << name << " " << EscapeHelp(family->description) << "\n";
    out << "# TYPE " << name << " " << KindName(family->kind) << "\n";
    for (const auto& [key, s] : family->series) {
      if (family->kind != TRITONSERVER_METRIC_KIND_HISTOGRAM) {
        out << name << key << " " << FormatMetricValue(s->value) << "\n";
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= s->bounds.size(); ++i) {
        cumulative += s->bucket_counts[i];
        const std::string le =
            i < s->bounds.size() ? FormatMetricValue(s->bounds[i]) : std::string("+Inf");
        out << name << "_bucket" << FormatLabels(s->labels, "le", le) << " " << cumulative << "\n";
      }
      out << name << "_sum" << key << " " << FormatMetricValue(s->sum) << "\n";
      out << name << "_count" << key << " " << s->count << "\n";
    }
  }
  return out.str();
}

}  // namespace inflight::server
