#include "backend/instance_state.h"

#include <chrono>

#include "backend/leader_mode.h"
#include "backend/request_converter.h"
#include "backend/response_converter.h"
#include "backend/triton_error.h"
#include "backend/triton_io.h"
#include "common/logging.h"
#include "common/steady_clock.h"

namespace inflight::backend {
namespace {

std::uint64_t NowNs() {
  return static_cast<std::uint64_t>(SteadyNowNs());
}

void LogTritonError(TRITONSERVER_Error* err, const char* what) {
  if (err == nullptr) return;
  LOG_ERROR("{}: {}", what, TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

}  // namespace

InstanceState::InstanceState(ModelState& model, TRITONBACKEND_ModelInstance* instance)
    : model_(model), instance_(instance) {}

Result<std::unique_ptr<InstanceState>> InstanceState::Create(
    ModelState& model, TRITONBACKEND_ModelInstance* instance) {
  auto state = std::unique_ptr<InstanceState>(new InstanceState(model, instance));
  const config::LlmParams& p = model.params();
  // Under mpirun with a split engine, ranks > 0 do not return from here (leader_mode.h).
  auto executor = StartExecutor(model);
  if (!executor.ok()) {
    return Status(
        executor.status().code(),
        "model '" + model.name() + "': cannot start the executor: " + executor.status().message());
  }
  state->executor_ = std::move(executor).value();
  state->metrics_ = std::make_unique<MetricsReporter>(model.name(), model.version(),
                                                      p.batching_type == config::BatchingType::kV1);
  state->metrics_->ReportLimits(state->executor_->maxBatchSize(),
                                state->executor_->getKvCacheStats());
  state->response_thread_ = std::thread([s = state.get()] { s->ResponseLoop(); });
  state->cancellation_thread_ = std::thread([s = state.get()] { s->CancellationLoop(); });
  state->stats_thread_ = std::thread([s = state.get()] { s->StatsLoop(); });
  return state;
}

InstanceState::~InstanceState() {
  stopping_ = true;
  wake_.notify_all();
  if (cancellation_thread_.joinable()) cancellation_thread_.join();
  if (stats_thread_.joinable()) stats_thread_.join();
  // shutdown() gives every pending request a final (cancelled) response, which the response thread
  // delivers before it sees the executor drained.
  if (executor_) executor_->shutdown();
  if (response_thread_.joinable()) response_thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, row] : rows_) {
    TritonRequest& parent = *row.parent;
    if (--parent.remaining_rows == 0) {
      if (!parent.failed) {
        LogTritonError(TRITONBACKEND_ResponseFactorySendFlags(parent.factory,
                                                              TRITONSERVER_RESPONSE_COMPLETE_FINAL),
                       "final flag at shutdown");
      }
      FinishRequest(parent);
    }
  }
  rows_.clear();
}

void InstanceState::Execute(TRITONBACKEND_Request** requests, std::uint32_t count) {
  // NOTE: the array belongs to Triton; each request pointer is ours from here on.
  const std::uint64_t start = NowNs();
  for (std::uint32_t i = 0; i < count; ++i) ExecuteOne(requests[i]);
  // One execution of `count` requests (Triton's execution_count and batch_stats): converting and
  // enqueueing them; generation itself runs on the executor's thread.
  const std::uint64_t end = NowNs();
  LogTritonError(
      TRITONBACKEND_ModelInstanceReportBatchStatistics(instance_, count, start, start, end, end),
      "report batch statistics");
}

void InstanceState::RespondError(TRITONBACKEND_Request* request, const Status& status,
                                 std::uint64_t start_ns) {
  TRITONBACKEND_Response* response = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, request);
  if (err == nullptr) {
    TRITONSERVER_Error* reason = ToTritonError(status);
    LogTritonError(
        TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, reason),
        "send error response");
    TRITONSERVER_ErrorDelete(reason);
  } else {
    LogTritonError(err, "create error response");
  }
  const std::uint64_t end = NowNs();
  LogTritonError(TRITONBACKEND_ModelInstanceReportStatistics(instance_, request, false, start_ns,
                                                             start_ns, end, end),
                 "report statistics");
  LogTritonError(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL),
                 "release request");
}

void InstanceState::ExecuteOne(TRITONBACKEND_Request* request) {
  const std::uint64_t start = NowNs();
  const std::string id = RequestIdOf(request);
  auto inputs = ReadInputs(request);
  if (!inputs.ok()) return RespondError(request, inputs.status(), start);
  const config::LlmParams& p = model_.params();
  ModelSettings settings{p.decoupled, p.max_batch_size, p.exclude_input_in_output};
  auto converted = ConvertRequest(*inputs, settings);
  if (!converted.ok()) return RespondError(request, converted.status(), start);
  if (converted->stop) return HandleStop(request, id);
  auto outputs = RequestedOutputs(request);
  if (!outputs.ok()) return RespondError(request, outputs.status(), start);

  auto parent = std::make_shared<TritonRequest>();
  parent->request = request;
  parent->id = id;
  parent->outputs = std::move(outputs).value();
  parent->return_perf_metrics = converted->return_perf_metrics;
  parent->report_batch_index = converted->rows.size() > 1;
  parent->exec_start_ns = start;
  Status st = FromTritonError(TRITONBACKEND_ResponseFactoryNew(&parent->factory, request));
  if (!st.ok()) return RespondError(request, st, start);

  std::lock_guard<std::mutex> lock(
      mu_);  // the response thread must not see ids before they are mapped
  std::vector<Result<IdType>> ids = executor_->enqueueRequests(converted->rows);
  Status first_error;
  for (std::size_t b = 0; b < ids.size(); ++b) {
    if (!ids[b].ok()) {
      if (first_error.ok()) first_error = ids[b].status();
      continue;
    }
    parent->executor_ids.push_back(*ids[b]);
    Row& row = rows_[*ids[b]];
    row = Row{parent, static_cast<std::int32_t>(b),
              static_cast<std::int64_t>(converted->rows[b].input_token_ids.size()), 0, nullptr};
    if (converted->rows[b].streaming && model_.stream_tokenizer() != nullptr)
      row.holdback = std::make_shared<StreamHoldback>(*model_.stream_tokenizer());
  }
  parent->remaining_rows = static_cast<int>(parent->executor_ids.size());
  if (!first_error.ok()) {
    // One row was refused: the whole Triton request fails; rows already queued are cancelled and
    // their responses dropped.
    for (IdType eid : parent->executor_ids) executor_->cancelRequest(eid);
    parent->failed = true;
    parent->any_row_error = true;
    TRITONBACKEND_Response* response = nullptr;
    if (TRITONSERVER_Error* err =
            TRITONBACKEND_ResponseNewFromFactory(&response, parent->factory)) {
      LogTritonError(err, "create error response");
    } else {
      TRITONSERVER_Error* reason = ToTritonError(first_error);
      LogTritonError(
          TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, reason),
          "send error response");
      TRITONSERVER_ErrorDelete(reason);
    }
    if (parent->remaining_rows == 0) FinishRequest(*parent);
  }
}

void InstanceState::HandleStop(TRITONBACKEND_Request* request, const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [eid, row] : rows_) {
      if (!id.empty() && row.parent->id == id) executor_->cancelRequest(eid);
    }
  }
  TRITONBACKEND_Response* response = nullptr;
  if (TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, request)) {
    LogTritonError(err, "create stop response");
  } else {
    LogTritonError(
        TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, nullptr),
        "send stop response");
  }
  LogTritonError(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL),
                 "release stop request");
}

void InstanceState::HandleResponse(Response& response) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rows_.find(response.request_id);
  if (it == rows_.end()) return;
  Row& row = it->second;
  // Ids that end inside a character wait for the next response (stream_holdback.h).
  if (row.holdback && !response.hasError() && !row.holdback->Apply(response.result)) return;
  TritonRequest& parent = *row.parent;
  const bool row_final = response.isFinal();
  const bool last = row_final && parent.remaining_rows == 1;
  if (!parent.failed) {
    TRITONBACKEND_Response* out = nullptr;
    if (TRITONSERVER_Error* err = TRITONBACKEND_ResponseNewFromFactory(&out, parent.factory)) {
      LogTritonError(err, "create response");
    } else {
      TRITONSERVER_Error* reason = nullptr;
      if (response.hasError()) {
        parent.any_row_error = true;
        reason = ToTritonError(*response.error);
      } else {
        RowOutputContext ctx;
        ctx.batched = model_.params().max_batch_size > 0;
        ctx.batch_index = row.batch_index;
        ctx.report_batch_index = parent.report_batch_index;
        ctx.return_perf_metrics = parent.return_perf_metrics;
        ctx.logits_dtype = model_.logits_dtype();
        for (const auto& beam : response.result.output_token_ids) {
          row.output_len += static_cast<std::int64_t>(beam.size());
          break;  // count the first beam only
        }
        Status st = WriteOutputs(out, BuildOutputs(response.result, ctx, parent.outputs));
        if (!st.ok()) reason = ToTritonError(st);
      }
      LogTritonError(
          TRITONBACKEND_ResponseSend(out, last ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0, reason),
          "send response");
      if (reason != nullptr) TRITONSERVER_ErrorDelete(reason);
    }
  }
  if (!row_final) return;
  // NOTE: a cancelled row is not a success, so that Triton counts a cancelled request the same way
  // here and in an ensemble around this model (inflight-server labels it reason="CANCELED").
  for (FinishReason reason : response.result.finish_reasons) {
    if (reason == FinishReason::kCancelled) parent.any_row_error = true;
  }
  const ResponseResult& result = response.result;
  metrics_->ObserveRequest({row.input_len, row.output_len, result.arrival_time_ns,
                            result.first_token_time_ns, result.last_token_time_ns});
  auto parent_ptr = row.parent;  // keep alive past erase
  rows_.erase(it);
  if (--parent_ptr->remaining_rows == 0) FinishRequest(*parent_ptr);
}

void InstanceState::FinishRequest(TritonRequest& parent) {
  const std::uint64_t end = NowNs();
  LogTritonError(TRITONBACKEND_ModelInstanceReportStatistics(
                     instance_, parent.request, !parent.any_row_error, parent.exec_start_ns,
                     parent.exec_start_ns, end, end),
                 "report statistics");
  LogTritonError(TRITONBACKEND_ResponseFactoryDelete(parent.factory), "delete response factory");
  parent.factory = nullptr;
  LogTritonError(TRITONBACKEND_RequestRelease(parent.request, TRITONSERVER_REQUEST_RELEASE_ALL),
                 "release request");
  parent.request = nullptr;
}

void InstanceState::ResponseLoop() {
  // awaitResponses blocks on the executor's condition variable: no polling. The timeout only bounds
  // how long shutdown waits. Requests left without a final response at shutdown are finished by the
  // destructor.
  while (true) {
    std::vector<Response> responses = executor_->awaitResponses(std::chrono::milliseconds(200));
    for (Response& r : responses) HandleResponse(r);
    if (stopping_ && responses.empty()) return;
  }
}

bool InstanceState::SleepUnlessStopping(std::chrono::milliseconds period) {
  std::unique_lock<std::mutex> lock(wake_mu_);
  return !wake_.wait_for(lock, period, [this] { return stopping_.load(); });
}

void InstanceState::CancellationLoop() {
  const auto period = std::chrono::milliseconds(model_.params().cancellation_check_period_ms);
  while (SleepUnlessStopping(period)) {
    std::vector<IdType> to_cancel;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [eid, row] : rows_) {
        bool cancelled = false;
        LogTritonError(TRITONBACKEND_ResponseFactoryIsCancelled(row.parent->factory, &cancelled),
                       "check cancellation");
        if (cancelled) to_cancel.push_back(eid);
      }
    }
    for (IdType eid : to_cancel) executor_->cancelRequest(eid);
  }
}

void InstanceState::StatsLoop() {
  const auto period = std::chrono::milliseconds(model_.params().stats_check_period_ms);
  while (SleepUnlessStopping(period)) {
    auto stats = executor_->getLatestIterationStats();
    if (!stats.empty()) metrics_->ReportIteration(stats.back());
  }
}

}  // namespace inflight::backend
