// Custom metrics of the LLM model through Triton's metrics API, with NVIDIA's structure and labels
// under the inflight_ prefix (nv_trt_llm_request_metrics{request_type=...} becomes
// inflight_request_metrics{request_type=...}).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inflight/executor.h"
#include "triton/core/tritonserver.h"

namespace inflight::backend {

class MetricsReporter {
 public:
  // Creates the families and one metric per label value. Failures are logged and leave that metric
  // out: metrics never stop a model from loading.
  MetricsReporter(const std::string& model_name, std::uint64_t version, bool static_batching);
  ~MetricsReporter();
  MetricsReporter(const MetricsReporter&) = delete;
  MetricsReporter& operator=(const MetricsReporter&) = delete;

  void ReportIteration(const IterationStats& stats);
  void ObserveRequest(std::int64_t input_tokens, std::int64_t output_tokens);

 private:
  struct Family;
  TRITONSERVER_Metric* Get(const std::string& family, const std::string& label) const;
  void Set(const std::string& family, const std::string& label, double value) const;

  std::string model_;
  std::string version_;
  std::vector<std::unique_ptr<Family>> families_;
};

}  // namespace inflight::backend
