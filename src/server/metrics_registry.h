// The process-wide registry behind TRITONSERVER_MetricFamily* / TRITONSERVER_Metric*, with Triton's
// rules per kind, rendered in Prometheus text format. Process-wide because the C API that backends
// call names no server.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "triton/core/tritonserver.h"

namespace inflight::server {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;  // sorted by key

struct MetricFamilyData;

// One time series (one label set) of a family; shared by every TRITONSERVER_Metric made for the
// same labels, as prometheus-cpp does.
struct MetricSeries {
  MetricLabels labels;
  double value = 0.0;                   // counter, gauge
  std::vector<double> bounds;           // histogram bucket upper bounds, increasing
  std::vector<uint64_t> bucket_counts;  // per bucket (not cumulative) plus +Inf
  double sum = 0.0;
  uint64_t count = 0;
  int num_handles = 0;
};

struct MetricFamilyData {
  TRITONSERVER_MetricKind kind = TRITONSERVER_METRIC_KIND_COUNTER;
  std::string name;
  std::string description;
  int num_handles = 0;  // TRITONSERVER_MetricFamily objects pointing here
  bool alive = true;    // false once every family handle was deleted
  std::map<std::string, std::shared_ptr<MetricSeries>> series;  // by rendered label key
};

// What TRITONSERVER_MetricFamily / TRITONSERVER_Metric / TRITONSERVER_MetricArgs point to.
struct MetricFamilyHandle {
  std::shared_ptr<MetricFamilyData> family;
};
struct MetricHandle {
  std::shared_ptr<MetricFamilyData> family;
  std::shared_ptr<MetricSeries> series;
};
struct MetricArgsData {
  bool has_histogram = false;
  std::vector<double> buckets;
};

class MetricsRegistry {
 public:
  static MetricsRegistry& Global();

  Result<MetricFamilyHandle*> NewFamily(TRITONSERVER_MetricKind kind, const std::string& name,
                                        const std::string& description);
  Status DeleteFamily(MetricFamilyHandle* handle);
  Result<MetricHandle*> NewMetric(MetricFamilyHandle* family, MetricLabels labels,
                                  const MetricArgsData* args);
  Status DeleteMetric(MetricHandle* metric);

  Result<double> Value(MetricHandle* metric);
  Status Increment(MetricHandle* metric, double value);
  Status Set(MetricHandle* metric, double value);
  Status Observe(MetricHandle* metric, double value);
  TRITONSERVER_MetricKind Kind(MetricHandle* metric);

  // Every live family: # HELP, # TYPE, then its samples.
  std::string RenderPrometheus() const;

 private:
  Status CheckAlive(const MetricHandle* metric) const;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<MetricFamilyData>> families_;
};

// Prometheus text helpers, shared with the nv_inference_* rendering.
std::string FormatMetricValue(double value);
std::string FormatLabels(const MetricLabels& labels, const std::string& extra_key = {},
                         const std::string& extra_value = {});

}  // namespace inflight::server
