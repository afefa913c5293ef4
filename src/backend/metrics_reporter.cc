#include "backend/metrics_reporter.h"

#include <algorithm>
#include <chrono>

#include "common/logging.h"

namespace inflight::backend {

struct MetricsReporter::Family {
  std::string name;
  TRITONSERVER_MetricFamily* family = nullptr;
  std::map<std::string, TRITONSERVER_Metric*> metrics;  // by category label value
};

namespace {

constexpr const char* kRequest = "nv_trt_llm_request_metrics";
constexpr const char* kMemory = "nv_trt_llm_runtime_memory_metrics";
constexpr const char* kKvCache = "nv_trt_llm_kv_cache_block_metrics";
constexpr const char* kInflight = "nv_trt_llm_inflight_batcher_metrics";
constexpr const char* kV1 = "nv_trt_llm_v1_metrics";
constexpr const char* kGeneral = "nv_trt_llm_general_metrics";
constexpr const char* kInputLen = "nv_llm_input_token_len";
constexpr const char* kOutputLen = "nv_llm_output_token_len";
constexpr const char* kFirstToken = "nv_llm_time_to_first_token_seconds";
constexpr const char* kPerToken = "nv_llm_time_per_output_token_seconds";

bool LogIfError(TRITONSERVER_Error* err, const std::string& what) {
  if (err == nullptr) return false;
  LOG_WARN("metrics: {}: {}", what, TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  return true;
}

// Labels model, version and (when `key` is set) key=value; freed by the destructor.
class Labels {
 public:
  Labels(const std::string& model, const std::string& version, const char* key, const char* value) {
    params_.push_back(
        TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, model.c_str()));
    params_.push_back(
        TRITONSERVER_ParameterNew("version", TRITONSERVER_PARAMETER_STRING, version.c_str()));
    if (key != nullptr) {
      params_.push_back(TRITONSERVER_ParameterNew(key, TRITONSERVER_PARAMETER_STRING, value));
    }
  }
  ~Labels() {
    for (const TRITONSERVER_Parameter* p : params_) {
      TRITONSERVER_ParameterDelete(const_cast<TRITONSERVER_Parameter*>(p));
    }
  }
  const TRITONSERVER_Parameter** data() { return params_.data(); }
  std::uint64_t size() const { return params_.size(); }

 private:
  std::vector<const TRITONSERVER_Parameter*> params_;
};

// NVIDIA's buckets for the token-length histograms.
const std::vector<double> kTokenBuckets = {10, 50, 100, 500, 1000};
// Seconds: from a fast GPU step to a slow CPU one.
const std::vector<double> kFirstTokenBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                1,     2.5,  5,     10,   30,  60};
const std::vector<double> kPerTokenBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                              0.1,   0.25,   0.5,   1,    2.5};

}  // namespace

MetricsReporter::MetricsReporter(const std::string& model_name, std::uint64_t version,
                                 bool static_batching)
    : model_(model_name), version_(std::to_string(version)), static_batching_(static_batching) {
  // Descriptions as the HELP lines of NVIDIA's backend.
  AddGauges(kRequest, "TRT LLM request metrics", "request_type",
            {"active", "max", "scheduled", "context", "waiting"});
  AddGauges(kMemory, "TRT LLM runtime memory metrics", "memory_type", {"cpu", "gpu", "pinned"});
  AddGauges(kKvCache, "TRT LLM KV cache block metrics", "kv_cache_block_type",
            {"max", "free", "used", "tokens_per", "reused", "fraction"});
  if (static_batching) {
    AddGauges(kV1, "TRT LLM v1-specific metrics", "v1_specific_metric",
              {"total_context_tokens", "total_generation_tokens", "empty_generation_slots"});
  } else {
    AddGauges(kInflight, "TRT LLM inflight_batcher-specific metrics",
              "inflight_batcher_specific_metric",
              {"total_context_tokens", "generation_requests", "micro_batch_id", "paused_requests"});
  }
  AddGauges(kGeneral, "General TRT LLM metrics", "general_type",
            {"timestamp", "iteration_counter"});
  AddHistogram(kInputLen, "TRT LLM response metrics", "response_metric_type", "total_input_tokens",
               kTokenBuckets);
  AddHistogram(kOutputLen, "TRT LLM response metrics", "response_metric_type",
               "total_output_tokens", kTokenBuckets);
  AddHistogram(kFirstToken, "Time from a request's arrival to its first output token, seconds",
               nullptr, nullptr, kFirstTokenBuckets);
  AddHistogram(kPerToken, "Mean time between a request's output tokens after the first, seconds",
               nullptr, nullptr, kPerTokenBuckets);
}

void MetricsReporter::AddGauges(const char* name, const char* description, const char* label_key,
                                const std::vector<const char*>& label_values) {
  auto fam = std::make_unique<Family>();
  fam->name = name;
  if (LogIfError(TRITONSERVER_MetricFamilyNew(&fam->family, TRITONSERVER_METRIC_KIND_GAUGE, name,
                                              description),
                 name)) {
    return;
  }
  for (const char* value : label_values) {
    Labels labels(model_, version_, label_key, value);
    TRITONSERVER_Metric* metric = nullptr;
    if (!LogIfError(TRITONSERVER_MetricNew(&metric, fam->family, labels.data(), labels.size()),
                    name)) {
      fam->metrics[value] = metric;
    }
  }
  families_.push_back(std::move(fam));
}

void MetricsReporter::AddHistogram(const char* name, const char* description, const char* label_key,
                                   const char* label_value, const std::vector<double>& buckets) {
  auto fam = std::make_unique<Family>();
  fam->name = name;
  if (LogIfError(TRITONSERVER_MetricFamilyNew(&fam->family, TRITONSERVER_METRIC_KIND_HISTOGRAM,
                                              name, description),
                 name)) {
    return;
  }
  TRITONSERVER_MetricArgs* args = nullptr;
  if (!LogIfError(TRITONSERVER_MetricArgsNew(&args), name)) {
    LogIfError(TRITONSERVER_MetricArgsSetHistogram(args, buckets.data(), buckets.size()), name);
    Labels labels(model_, version_, label_key, label_value);
    TRITONSERVER_Metric* metric = nullptr;
    if (!LogIfError(TRITONSERVER_MetricNewWithArgs(&metric, fam->family, labels.data(),
                                                   labels.size(), args),
                    name)) {
      fam->metrics[""] = metric;
    }
    TRITONSERVER_MetricArgsDelete(args);
  }
  families_.push_back(std::move(fam));
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

void MetricsReporter::Observe(const std::string& family, double value) const {
  if (TRITONSERVER_Metric* m = Get(family, "")) {
    LogIfError(TRITONSERVER_MetricObserve(m, value), family);
  }
}

void MetricsReporter::ReportKvCache(const KvCacheStats& kv) const {
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  Set(kKvCache, "max", d(kv.max_num_blocks));
  Set(kKvCache, "free", d(kv.free_num_blocks));
  Set(kKvCache, "used", d(kv.used_num_blocks));
  Set(kKvCache, "tokens_per", d(kv.tokens_per_block));
  Set(kKvCache, "reused", d(kv.reused_blocks));
  Set(kKvCache, "fraction",
      kv.max_num_blocks > 0 ? d(kv.used_num_blocks) / d(kv.max_num_blocks) : 0.0);
}

void MetricsReporter::ReportLimits(std::int64_t max_num_active_requests, const KvCacheStats& kv) {
  Set(kRequest, "max", static_cast<double>(max_num_active_requests));
  ReportKvCache(kv);
}

void MetricsReporter::ReportIteration(const IterationStats& s) {
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  Set(kRequest, "active", d(s.num_active_requests));
  Set(kRequest, "max", d(s.max_num_active_requests));
  Set(kRequest, "scheduled", d(s.num_scheduled_requests));
  Set(kRequest, "context", d(s.num_context_requests));
  Set(kRequest, "waiting", d(s.num_queued_requests));
  Set(kMemory, "cpu", d(s.cpu_mem_usage));
  Set(kMemory, "gpu", d(s.gpu_mem_usage));
  Set(kMemory, "pinned", d(s.pinned_mem_usage));
  ReportKvCache(s.kv_cache_stats);
  if (static_batching_) {
    // NVIDIA's V1 family: generation tokens of a static batch are one per generating request, and
    // the slots a static batch leaves empty are the batch size less its requests.
    Set(kV1, "total_context_tokens", d(s.total_context_tokens));
    Set(kV1, "total_generation_tokens", d(s.num_gen_requests));
    Set(kV1, "empty_generation_slots",
        d(std::max<std::int64_t>(0, s.max_num_active_requests - s.num_scheduled_requests)));
  } else {
    Set(kInflight, "total_context_tokens", d(s.total_context_tokens));
    Set(kInflight, "generation_requests", d(s.num_gen_requests));
    Set(kInflight, "micro_batch_id", d(s.micro_batch_id));
    Set(kInflight, "paused_requests", d(s.num_paused_requests));
  }
  // Unix time in seconds, as the example output of NVIDIA's README (timestamp 1700074049); the
  // iteration's own timestamp_ns is on the steady clock, which dashboards cannot place.
  Set(kGeneral, "timestamp",
      static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count()));
  Set(kGeneral, "iteration_counter", static_cast<double>(s.iter));
}

void MetricsReporter::ObserveRequest(const RequestObservation& r) {
  Observe(kInputLen, static_cast<double>(r.input_tokens));
  Observe(kOutputLen, static_cast<double>(r.output_tokens));
  if (r.first_token_time_ns <= 0 || r.arrival_time_ns <= 0) return;
  Observe(kFirstToken, static_cast<double>(r.first_token_time_ns - r.arrival_time_ns) * 1e-9);
  if (r.output_tokens > 1 && r.last_token_time_ns >= r.first_token_time_ns) {
    Observe(kPerToken, static_cast<double>(r.last_token_time_ns - r.first_token_time_ns) * 1e-9 /
                           static_cast<double>(r.output_tokens - 1));
  }
}

}  // namespace inflight::backend
