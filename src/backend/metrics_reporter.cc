#include "backend/metrics_reporter.h"

#include "common/logging.h"

namespace inflight::backend {

struct MetricsReporter::Family {
  std::string name;
  TRITONSERVER_MetricFamily* family = nullptr;
  std::map<std::string, TRITONSERVER_Metric*> metrics;  // by category label value
};

namespace {

struct FamilySpec {
  const char* name;
  const char* description;
  const char* label_key;
  std::vector<const char*> label_values;
};

bool LogIfError(TRITONSERVER_Error* err, const std::string& what) {
  if (err == nullptr) return false;
  LOG_WARN("metrics: {}: {}", what, TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  return true;
}

const double kTokenBuckets[] = {10, 50, 100, 500, 1000};

}  // namespace

MetricsReporter::MetricsReporter(const std::string& model_name, std::uint64_t version,
                                 bool static_batching)
    : model_(model_name), version_(std::to_string(version)) {
  const std::vector<FamilySpec> gauges = {
      {"inflight_request_metrics",
       "Request counts of the LLM model",
       "request_type",
       {"active", "max", "scheduled", "context", "waiting"}},
      {"inflight_runtime_memory_metrics",
       "Runtime memory of the LLM model, bytes",
       "memory_type",
       {"cpu", "gpu", "pinned"}},
      {"inflight_kv_cache_block_metrics",
       "KV cache blocks of the LLM model",
       "kv_cache_block_type",
       {"max", "free", "used", "tokens_per", "reused", "fraction"}},
      {static_batching ? "inflight_v1_metrics" : "inflight_batcher_metrics",
       static_batching ? "Static batching metrics" : "In-flight batching metrics",
       static_batching ? "v1_specific_metric" : "inflight_batcher_specific_metric",
       {"total_context_tokens", "generation_requests", "micro_batch_id", "paused_requests"}},
      {"inflight_general_metrics",
       "General metrics of the LLM model",
       "general_type",
       {"timestamp", "iteration_counter"}},
  };
  for (const FamilySpec& spec : gauges) {
    auto fam = std::make_unique<Family>();
    fam->name = spec.name;
    if (LogIfError(TRITONSERVER_MetricFamilyNew(&fam->family, TRITONSERVER_METRIC_KIND_GAUGE,
                                                spec.name, spec.description),
                   spec.name)) {
      continue;
    }
    for (const char* value : spec.label_values) {
      const TRITONSERVER_Parameter* labels[] = {
          TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, model_.c_str()),
          TRITONSERVER_ParameterNew("version", TRITONSERVER_PARAMETER_STRING, version_.c_str()),
          TRITONSERVER_ParameterNew(spec.label_key, TRITONSERVER_PARAMETER_STRING, value)};
      TRITONSERVER_Metric* metric = nullptr;
      if (!LogIfError(TRITONSERVER_MetricNew(&metric, fam->family, labels, 3), spec.name)) {
        fam->metrics[value] = metric;
      }
      for (const TRITONSERVER_Parameter* p : labels) {
        TRITONSERVER_ParameterDelete(const_cast<TRITONSERVER_Parameter*>(p));
      }
    }
    families_.push_back(std::move(fam));
  }
  for (const char* name : {"inflight_input_token_len", "inflight_output_token_len"}) {
    auto fam = std::make_unique<Family>();
    fam->name = name;
    if (LogIfError(TRITONSERVER_MetricFamilyNew(&fam->family, TRITONSERVER_METRIC_KIND_HISTOGRAM,
                                                name, "Tokens per request"),
                   name)) {
      continue;
    }
    TRITONSERVER_MetricArgs* args = nullptr;
    if (!LogIfError(TRITONSERVER_MetricArgsNew(&args), name)) {
      LogIfError(TRITONSERVER_MetricArgsSetHistogram(args, kTokenBuckets, 5), name);
      const TRITONSERVER_Parameter* labels[] = {
          TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, model_.c_str()),
          TRITONSERVER_ParameterNew("version", TRITONSERVER_PARAMETER_STRING, version_.c_str())};
      TRITONSERVER_Metric* metric = nullptr;
      if (!LogIfError(TRITONSERVER_MetricNewWithArgs(&metric, fam->family, labels, 2, args),
                      name)) {
        fam->metrics[""] = metric;
      }
      for (const TRITONSERVER_Parameter* p : labels) {
        TRITONSERVER_ParameterDelete(const_cast<TRITONSERVER_Parameter*>(p));
      }
      TRITONSERVER_MetricArgsDelete(args);
    }
    families_.push_back(std::move(fam));
  }
}

MetricsReporter::~MetricsReporter() {
  for (auto& fam : families_) {
    for (auto& [label, metric] : fam->metrics) TRITONSERVER_MetricDelete(metric);
    TRITONSERVER_MetricFamilyDelete(fam->family);
  }
}

TRITONSERVER_Metric* MetricsReporter::Get(const std::string& family,
                                          const std::string& label) const {
  for (const auto& fam : families_) {
    if (fam->name != family) continue;
    auto it = fam->metrics.find(label);
    return it == fam->metrics.end() ? nullptr : it->second;
  }
  return nullptr;
}

void MetricsReporter::Set(const std::string& family, const std::string& label, double value) const {
  if (TRITONSERVER_Metric* m = Get(family, label))
    LogIfError(TRITONSERVER_MetricSet(m, value), family);
}

void MetricsReporter::ReportIteration(const IterationStats& s) {
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  Set("inflight_request_metrics", "active", d(s.num_active_requests));
  Set("inflight_request_metrics", "max", d(s.max_num_active_requests));
  Set("inflight_request_metrics", "scheduled", d(s.num_scheduled_requests));
  Set("inflight_request_metrics", "context", d(s.num_context_requests));
  Set("inflight_request_metrics", "waiting", d(s.num_queued_requests));
  Set("inflight_runtime_memory_metrics", "cpu", d(s.cpu_mem_usage));
  Set("inflight_runtime_memory_metrics", "gpu", d(s.gpu_mem_usage));
  Set("inflight_runtime_memory_metrics", "pinned", d(s.pinned_mem_usage));
  const KvCacheStats& kv = s.kv_cache_stats;
  Set("inflight_kv_cache_block_metrics", "max", d(kv.max_num_blocks));
  Set("inflight_kv_cache_block_metrics", "free", d(kv.free_num_blocks));
  Set("inflight_kv_cache_block_metrics", "used", d(kv.used_num_blocks));
  Set("inflight_kv_cache_block_metrics", "tokens_per", d(kv.tokens_per_block));
  Set("inflight_kv_cache_block_metrics", "reused", d(kv.reused_blocks));
  Set("inflight_kv_cache_block_metrics", "fraction",
      kv.max_num_blocks > 0 ? d(kv.used_num_blocks) / d(kv.max_num_blocks) : 0.0);
  for (const char* fam : {"inflight_batcher_metrics", "inflight_v1_metrics"}) {
    Set(fam, "total_context_tokens", d(s.total_context_tokens));
    Set(fam, "generation_requests", d(s.num_gen_requests));
    Set(fam, "micro_batch_id", d(s.micro_batch_id));
    Set(fam, "paused_requests", d(s.num_paused_requests));
  }
  Set("inflight_general_metrics", "timestamp", d(s.timestamp_ns / 1000));
  Set("inflight_general_metrics", "iteration_counter", static_cast<double>(s.iter));
}

void MetricsReporter::ObserveRequest(std::int64_t input_tokens, std::int64_t output_tokens) {
  if (auto* m = Get("inflight_input_token_len", "")) {
    LogIfError(TRITONSERVER_MetricObserve(m, static_cast<double>(input_tokens)), "input_token_len");
  }
  if (auto* m = Get("inflight_output_token_len", "")) {
    LogIfError(TRITONSERVER_MetricObserve(m, static_cast<double>(output_tokens)),
               "output_token_len");
  }
}

}  // namespace inflight::backend
