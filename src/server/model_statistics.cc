#include "server/model_statistics.h"

#include <chrono>

namespace inflight::server {

namespace {

uint64_t Span(uint64_t from, uint64_t to) {
  return to > from ? to - from : 0;
}

uint64_t WallMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

nlohmann::json ToJson(const DurationStat& d) {
  return {{"count", d.count}, {"ns", d.ns}};
}

}  // namespace

const char* FailureReasonName(FailureReason reason) {
  switch (reason) {
    case FailureReason::kRejected:
      return "REJECTED";
    case FailureReason::kCanceled:
      return "CANCELED";
    case FailureReason::kBackend:
      return "BACKEND";
    case FailureReason::kOther:
      return "OTHER";
  }
  return "OTHER";
}

void ModelStatistics::ReportRequest(bool success, uint64_t queue_start_ns, uint64_t exec_start_ns,
                                    uint64_t compute_start_ns, uint64_t compute_end_ns,
                                    uint64_t exec_end_ns, FailureReason reason) {
  std::lock_guard lock(mu_);
  s_.last_inference_ms = WallMs();
  const uint64_t start = queue_start_ns != 0 ? queue_start_ns : exec_start_ns;
  if (!success) {
    s_.fail.Add(Span(start, exec_end_ns));
    ++s_.failures[reason];
    return;
  }
  s_.success.Add(Span(start, exec_end_ns));
  s_.queue.Add(Span(start, exec_start_ns));
  s_.compute_input.Add(Span(exec_start_ns, compute_start_ns));
  s_.compute_infer.Add(Span(compute_start_ns, compute_end_ns));
  s_.compute_output.Add(Span(compute_end_ns, exec_end_ns));
}

void ModelStatistics::ReportBatch(uint64_t batch_size, uint64_t exec_start_ns,
                                  uint64_t compute_start_ns, uint64_t compute_end_ns,
                                  uint64_t exec_end_ns) {
  std::lock_guard lock(mu_);
  s_.inference_count += batch_size;
  s_.execution_count += 1;
  auto& b = s_.batches[batch_size];
  b.compute_input.Add(Span(exec_start_ns, compute_start_ns));
  b.compute_infer.Add(Span(compute_start_ns, compute_end_ns));
  b.compute_output.Add(Span(compute_end_ns, exec_end_ns));
}

void ModelStatistics::ReportOutcome(bool success, uint64_t start_ns, uint64_t end_ns,
                                    FailureReason reason) {
  std::lock_guard lock(mu_);
  s_.last_inference_ms = WallMs();
  (success ? s_.success : s_.fail).Add(Span(start_ns, end_ns));
  if (!success) ++s_.failures[reason];
}

ModelStatsSnapshot ModelStatistics::Snapshot() const {
  std::lock_guard lock(mu_);
  return s_;
}

nlohmann::json ModelStatistics::ToJson(const std::string& name, const std::string& version) const {
  const ModelStatsSnapshot s = Snapshot();
  nlohmann::json batches = nlohmann::json::array();
  for (const auto& [size, b] : s.batches) {
    batches.push_back({{"batch_size", size},
                       {"compute_input", server::ToJson(b.compute_input)},
                       {"compute_infer", server::ToJson(b.compute_infer)},
                       {"compute_output", server::ToJson(b.compute_output)}});
  }
  return {{"name", name},
          {"version", version},
          {"last_inference", s.last_inference_ms},
          {"inference_count", s.inference_count},
          {"execution_count", s.execution_count},
          {"inference_stats",
           {{"success", server::ToJson(s.success)},
            {"fail", server::ToJson(s.fail)},
            {"queue", server::ToJson(s.queue)},
            {"compute_input", server::ToJson(s.compute_input)},
            {"compute_infer", server::ToJson(s.compute_infer)},
            {"compute_output", server::ToJson(s.compute_output)},
            {"cache_hit", server::ToJson(DurationStat{})},
            {"cache_miss", server::ToJson(DurationStat{})}}},
          {"response_stats", nlohmann::json::object()},
          {"batch_stats", batches},
          {"memory_usage", nlohmann::json::array()}};
}

}  // namespace inflight::server
