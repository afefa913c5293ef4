// TRITONSERVER_MetricFamily*, TRITONSERVER_Metric*, TRITONSERVER_MetricArgs*.
#include <string>

#include "server/c_api_objects.h"
#include "server/metrics_registry.h"

using inflight::server::FromHandle;
using inflight::server::MetricArgsData;
using inflight::server::MetricFamilyHandle;
using inflight::server::MetricHandle;
using inflight::server::MetricLabels;
using inflight::server::MetricsRegistry;
using inflight::server::ToHandle;
using inflight::server::ToTritonError;

namespace {

TRITONSERVER_Error* NewMetric(TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
                              const TRITONSERVER_Parameter** labels, const uint64_t label_count,
                              const MetricArgsData* args) {
  INFLIGHT_API_REQUIRE(metric);
  INFLIGHT_API_REQUIRE(family);
  if (labels == nullptr && label_count > 0) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG,
                                 "TRITONSERVER_MetricNew: labels is null but label_count > 0");
  }
  MetricLabels parsed;
  for (uint64_t i = 0; i < label_count; ++i) {
    const TRITONSERVER_Parameter* p = labels[i];
    if (p == nullptr || p->type != TRITONSERVER_PARAMETER_STRING) {
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG,
                                   ("TRITONSERVER_MetricNew: label " + std::to_string(i) +
                                    " must be a TRITONSERVER_PARAMETER_STRING parameter")
                                       .c_str());
    }
    parsed.emplace_back(p->name, p->string_value);
  }
  auto result = MetricsRegistry::Global().NewMetric(FromHandle<MetricFamilyHandle>(family),
                                                    std::move(parsed), args);
  if (!result.ok()) return ToTritonError(result.status());
  *metric = ToHandle<TRITONSERVER_Metric>(result.value());
  return nullptr;
}

MetricHandle* M(TRITONSERVER_Metric* m) {
  return FromHandle<MetricHandle>(m);
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONSERVER_MetricFamilyNew(TRITONSERVER_MetricFamily** family,
                                                 const TRITONSERVER_MetricKind kind,
                                                 const char* name, const char* description) {
  INFLIGHT_API_REQUIRE(family);
  INFLIGHT_API_REQUIRE(name);
  auto result =
      MetricsRegistry::Global().NewFamily(kind, name, description == nullptr ? "" : description);
  if (!result.ok()) return ToTritonError(result.status());
  *family = ToHandle<TRITONSERVER_MetricFamily>(result.value());
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricFamilyDelete(TRITONSERVER_MetricFamily* family) {
  return ToTritonError(
      MetricsRegistry::Global().DeleteFamily(FromHandle<MetricFamilyHandle>(family)));
}

TRITONSERVER_Error* TRITONSERVER_MetricArgsNew(TRITONSERVER_MetricArgs** args) {
  INFLIGHT_API_REQUIRE(args);
  *args = ToHandle<TRITONSERVER_MetricArgs>(new MetricArgsData{});
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricArgsSetHistogram(TRITONSERVER_MetricArgs* args,
                                                        const double* buckets,
                                                        const uint64_t buckets_count) {
  INFLIGHT_API_REQUIRE(args);
  if (buckets == nullptr && buckets_count > 0) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG,
                                 "TRITONSERVER_MetricArgsSetHistogram: buckets is null");
  }
  auto* a = FromHandle<MetricArgsData>(args);
  a->has_histogram = true;
  a->buckets.assign(buckets, buckets + buckets_count);
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricArgsDelete(TRITONSERVER_MetricArgs* args) {
  delete FromHandle<MetricArgsData>(args);
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricNew(TRITONSERVER_Metric** metric,
                                           TRITONSERVER_MetricFamily* family,
                                           const TRITONSERVER_Parameter** labels,
                                           const uint64_t label_count) {
  return NewMetric(metric, family, labels, label_count, nullptr);
}

TRITONSERVER_Error* TRITONSERVER_MetricNewWithArgs(TRITONSERVER_Metric** metric,
                                                   TRITONSERVER_MetricFamily* family,
                                                   const TRITONSERVER_Parameter** labels,
                                                   const uint64_t label_count,
                                                   const TRITONSERVER_MetricArgs* args) {
  return NewMetric(metric, family, labels, label_count,
                   reinterpret_cast<const MetricArgsData*>(args));
}

TRITONSERVER_Error* TRITONSERVER_MetricDelete(TRITONSERVER_Metric* metric) {
  return ToTritonError(MetricsRegistry::Global().DeleteMetric(M(metric)));
}

TRITONSERVER_Error* TRITONSERVER_MetricValue(TRITONSERVER_Metric* metric, double* value) {
  INFLIGHT_API_REQUIRE(metric);
  INFLIGHT_API_REQUIRE(value);
  auto result = MetricsRegistry::Global().Value(M(metric));
  if (!result.ok()) return ToTritonError(result.status());
  *value = result.value();
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MetricIncrement(TRITONSERVER_Metric* metric, double value) {
  INFLIGHT_API_REQUIRE(metric);
  return ToTritonError(MetricsRegistry::Global().Increment(M(metric), value));
}

TRITONSERVER_Error* TRITONSERVER_MetricSet(TRITONSERVER_Metric* metric, double value) {
  INFLIGHT_API_REQUIRE(metric);
  return ToTritonError(MetricsRegistry::Global().Set(M(metric), value));
}

TRITONSERVER_Error* TRITONSERVER_MetricObserve(TRITONSERVER_Metric* metric, double value) {
  INFLIGHT_API_REQUIRE(metric);
  return ToTritonError(MetricsRegistry::Global().Observe(M(metric), value));
}

TRITONSERVER_Error* TRITONSERVER_GetMetricKind(TRITONSERVER_Metric* metric,
                                               TRITONSERVER_MetricKind* kind) {
  INFLIGHT_API_REQUIRE(metric);
  INFLIGHT_API_REQUIRE(kind);
  *kind = MetricsRegistry::Global().Kind(M(metric));
  return nullptr;
}

}  // extern "C"
