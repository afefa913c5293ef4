// Custom metrics of the LLM model through Triton's metrics API, under the family names, label keys
// and label values of NVIDIA's tensorrtllm_backend (custom_metrics_reporter.cc; the families and
// labels are listed in its README's "Triton Metrics" section), so that dashboards and Triton's own
// endpoint-load-metrics header (it reads nv_trt_llm_kv_cache_block_metrics) work unchanged:
//
//   nv_trt_llm_request_metrics{request_type=active|max|scheduled|context|waiting}
//   nv_trt_llm_runtime_memory_metrics{memory_type=cpu|gpu|pinned}
//   nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=max|free|used|tokens_per|reused|fraction}
//   nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric=total_context_tokens|
//       generation_requests|micro_batch_id|paused_requests}   (V1 batching: nv_trt_llm_v1_metrics
//       {v1_specific_metric=total_context_tokens|total_generation_tokens|empty_generation_slots})
//   nv_trt_llm_general_metrics{general_type=timestamp|iteration_counter}
//   nv_llm_input_token_len / nv_llm_output_token_len histograms
//       {response_metric_type=total_input_tokens / total_output_tokens}, buckets 10..1000
//
// Ours, which NVIDIA's Triton backend does not report: per-request latency histograms named as
// trtllm-serve's time_to_first_token_seconds and time_per_output_token_seconds, with the nv_llm_
// prefix of the token histograms: nv_llm_time_to_first_token_seconds and
// nv_llm_time_per_output_token_seconds (the mean gap between a request's output tokens).
// Every metric also has the labels model and version.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inflight/executor.h"
#include "triton/core/tritonserver.h"

namespace inflight::backend {

// What one finished request contributes to the histograms.
struct RequestObservation {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  // Steady-clock ns from the executor (ResponseResult); 0 when unknown (no token was produced).
  std::int64_t arrival_time_ns = 0;
  std::int64_t first_token_time_ns = 0;
  std::int64_t last_token_time_ns = 0;
};

class MetricsReporter {
 public:
  // Creates the families and one metric per label value. Failures are logged and leave that metric
  // out: metrics never stop a model from loading.
  MetricsReporter(const std::string& model_name, std::uint64_t version, bool static_batching);
  ~MetricsReporter();
  MetricsReporter(const MetricsReporter&) = delete;
  MetricsReporter& operator=(const MetricsReporter&) = delete;

  // The limits known once the executor is up, so that `max` values do not read 0 until the first
  // iteration: the request limit and the KV cache pool.
  void ReportLimits(std::int64_t max_num_active_requests, const KvCacheStats& kv);
  void ReportIteration(const IterationStats& stats);
  void ObserveRequest(const RequestObservation& request);

 private:
  struct Family;
  TRITONSERVER_Metric* Get(const std::string& family, const std::string& label) const;
  void Set(const std::string& family, const std::string& label, double value) const;
  void Observe(const std::string& family, double value) const;
  void ReportKvCache(const KvCacheStats& kv) const;
  void AddGauges(const char* name, const char* description, const char* label_key,
                 const std::vector<const char*>& label_values);
  void AddHistogram(const char* name, const char* description, const char* label_key,
                    const char* label_value, const std::vector<double>& buckets);

  std::string model_;
  std::string version_;
  bool static_batching_ = false;
  std::vector<std::unique_ptr<Family>> families_;
};

}  // namespace inflight::backend
