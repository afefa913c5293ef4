// Per model version: the counters behind nv_inference_* and /v2/models/<m>/stats, fed by
// TRITONBACKEND_ModelInstanceReportStatistics / ReportBatchStatistics and by the core for the
// requests it answers itself (execute errors, cancellations, shutdown).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace inflight::server {

struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(uint64_t duration_ns) {
    ++count;
    ns += duration_ns;
  }
};

// Why a request failed: the values of the `reason` label of nv_inference_request_failure in
// tritonserver 2.68 (its metrics documentation): rejected by the scheduler (queue full), cancelled,
// failed in the backend, anything else (an invalid request, an unloaded model).
enum class FailureReason { kRejected, kCanceled, kBackend, kOther };
inline constexpr FailureReason kFailureReasons[] = {FailureReason::kRejected,
                                                    FailureReason::kCanceled,
                                                    FailureReason::kBackend, FailureReason::kOther};
const char* FailureReasonName(FailureReason reason);  // "REJECTED", "CANCELED", ...

struct ModelStatsSnapshot {
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  std::map<FailureReason, uint64_t> failures;  // fail.count by reason
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  uint64_t last_inference_ms = 0;
  struct Batch {
    DurationStat compute_input, compute_infer, compute_output;
  };
  std::map<uint64_t, Batch> batches;
};

class ModelStatistics {
 public:
  // Timestamps are steady-clock ns; queue_start_ns is when the core queued the request.
  // `reason` counts only when !success.
  void ReportRequest(bool success, uint64_t queue_start_ns, uint64_t exec_start_ns,
                     uint64_t compute_start_ns, uint64_t compute_end_ns, uint64_t exec_end_ns,
                     FailureReason reason = FailureReason::kBackend);
  void ReportBatch(uint64_t batch_size, uint64_t exec_start_ns, uint64_t compute_start_ns,
                   uint64_t compute_end_ns, uint64_t exec_end_ns);
  // A request that never reached (or failed in) the backend; an ensemble request's outcome.
  void ReportOutcome(bool success, uint64_t start_ns, uint64_t end_ns,
                     FailureReason reason = FailureReason::kOther);

  ModelStatsSnapshot Snapshot() const;
  // One entry of Triton's "model_stats" array.
  nlohmann::json ToJson(const std::string& name, const std::string& version) const;

 private:
  mutable std::mutex mu_;
  ModelStatsSnapshot s_;
};

}  // namespace inflight::server
