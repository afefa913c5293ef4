#include "executor/executor_impl.h"

#include <algorithm>
#include <chrono>
#include <string_view>

#include "common/logging.h"
#include "executor/response_builder.h"
#include "executor/runner_factory.h"
#include "executor/sampling/decoding_validation.h"
#include "model/engine_config.h"

namespace inflight {

using executor::RequestState;
using executor::ScheduledItem;

namespace {

Result<executor::SchedulerLimits> MakeLimits(const model::EngineConfig& engine,
                                             const ExecutorConfig& config) {
  executor::SchedulerLimits limits;
  const model::BuildLimits& build = engine.build;
  limits.max_batch_size = config.max_batch_size.value_or(build.max_batch_size);
  if (limits.max_batch_size < 1 || limits.max_batch_size > build.max_batch_size) {
    return InvalidArgument("max_batch_size " + std::to_string(limits.max_batch_size) +
                           " is out of range: the engine was built for [1, " +
                           std::to_string(build.max_batch_size) + "]");
  }
  limits.max_num_tokens = config.max_num_tokens.value_or(build.max_num_tokens);
  if (limits.max_num_tokens < 1 || limits.max_num_tokens > build.max_num_tokens) {
    return InvalidArgument("max_num_tokens " + std::to_string(limits.max_num_tokens) +
                           " is out of range: the engine was built for [1, " +
                           std::to_string(build.max_num_tokens) + "]");
  }
  limits.max_seq_len = build.max_seq_len;
  limits.tokens_per_block = build.tokens_per_block;
  RETURN_IF_ERROR(limits.Validate());
  return limits;
}

}  // namespace

Executor::Impl::Impl(ExecutorConfig config, std::unique_ptr<model::ModelRunner> runner,
                     executor::SchedulerLimits limits)
    : config_(std::move(config)),
      runner_(std::move(runner)),
      limits_(limits),
      blocks_(runner_->num_kv_blocks(), limits.tokens_per_block,
              config_.kv_cache_config.enable_block_reuse),
      scheduler_(config_.scheduler_config, config_.batching_type, limits_, blocks_),
      busy_poll_(config_.busy_poll.value_or(
          std::string_view(runner_->device_name()).starts_with("cuda"))) {
  kv_stats_snapshot_ = blocks_.Stats();
  lookahead_ =
      config_.device_sampling && runner_->supports_lookahead() && limits_.max_micro_batches == 1;
  thread_ = std::thread([this] { Loop(); });
}

Result<std::unique_ptr<Executor::Impl>> Executor::Impl::Create(const std::string& engine_dir,
                                                               const ExecutorConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  ASSIGN_OR_RETURN(model::EngineConfig engine, model::LoadEngineConfig(engine_dir));
  RETURN_IF_ERROR(MakeLimits(engine, config).status());  // before the weights are loaded
  ASSIGN_OR_RETURN(auto runner, executor::CreateModelRunner(engine_dir, engine, config));
  return CreateWithRunner(config, std::move(runner));
}

Result<std::unique_ptr<Executor::Impl>> Executor::Impl::CreateWithRunner(
    const ExecutorConfig& config, std::unique_ptr<model::ModelRunner> runner) {
  RETURN_IF_ERROR(config.Validate());
  const model::EngineConfig& engine = runner->config();
  ASSIGN_OR_RETURN(executor::SchedulerLimits limits, MakeLimits(engine, config));
  if (config.enable_micro_batching) {
    limits.max_micro_batches = std::max<std::int32_t>(1, runner->max_steps_in_flight());
  }
  if (limits.max_micro_batches > 1) {
    LOG_INFO("executor: up to {} micro-batches in flight (pipeline of {} stages)",
             limits.max_micro_batches, engine.pp_size);
  } else if (engine.pp_size > 1 && config.enable_micro_batching) {
    // NOTE: orchestrator mode does not split a step into Launch / Complete yet
    // (docs/multi_gpu.md): its stages take turns.
    LOG_WARN(
        "executor: the {} runner of this pp_size {} engine runs one step at a time; micro-batches "
        "in flight (enable_micro_batching) are implemented for the CPU and CUDA runners in leader "
        "mode",
        runner->device_name(), engine.pp_size);
  }
  LOG_INFO(
      "executor: {} on {}, {} KV blocks of {} tokens, max_batch_size {}, max_num_tokens {}, "
      "max_seq_len {}, sampling on the {}{}",
      engine.architecture_name, runner->device_name(), runner->num_kv_blocks(),
      limits.tokens_per_block, limits.max_batch_size, limits.max_num_tokens, limits.max_seq_len,
      config.device_sampling && runner->supports_device_sampling() ? "device when eligible"
                                                                   : "host",
      config.device_sampling && runner->supports_device_sampling() && runner->supports_lookahead()
          ? ", next step launched before the last one's tokens are back (lookahead)"
          : "");
  return std::unique_ptr<Impl>(new Impl(config, std::move(runner), limits));
}

Executor::Impl::~Impl() {
  Shutdown();
}

Status Executor::Impl::Validate(const Request& r) const {
  const model::EngineConfig& engine = runner_->config();
  const auto prompt_len = static_cast<std::int64_t>(r.input_token_ids.size());
  if (prompt_len == 0) {
    return InvalidArgument("input_token_ids is empty: a request needs at least one prompt token");
  }
  if (prompt_len > engine.build.max_input_len) {
    return InvalidArgument("input length " + std::to_string(prompt_len) +
                           " exceeds max_input_len " + std::to_string(engine.build.max_input_len) +
                           " of the engine");
  }
  if (r.max_tokens < 1) {
    return InvalidArgument("request_output_len " + std::to_string(r.max_tokens) +
                           " is not accepted: must be >= 1");
  }
  for (std::size_t i = 0; i < r.input_token_ids.size(); ++i) {
    const TokenIdType t = r.input_token_ids[i];
    if (t < 0 || t >= engine.vocab_size) {
      return InvalidArgument("input_ids[" + std::to_string(i) + "] = " + std::to_string(t) +
                             " is outside the vocabulary [0, " + std::to_string(engine.vocab_size) +
                             ")");
    }
  }
  RETURN_IF_ERROR(sampling::ValidateDecodingInputs(r, engine.vocab_size));
  return scheduler_.CheckFits(static_cast<SizeType>(prompt_len), r.max_tokens);
}

void Executor::Impl::Loop() {
  while (WaitForWork()) {
    AdmitAndCancel();
    if (scheduler_.HasWork()) {
      RunStep();
      busy_ = true;
    }
    if (busy_ && !scheduler_.HasWork()) {
      // Going idle: one more stats record, so gauges read from the latest iteration (active
      // requests, KV blocks) show the idle state instead of the last step's.
      RecordIteration(executor::ScheduleResult{}, 0.0);
      busy_ = false;
    }
  }
  DrainInFlight();
}

void Executor::Impl::AdmitAndCancel() {
  std::deque<std::unique_ptr<RequestState>> incoming;
  std::unordered_set<IdType> cancels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(incoming_);
    cancels.swap(cancels_);
  }
  for (auto& s : incoming) {
    const IdType id = s->sequence.id;
    scheduler_.Enqueue(&s->sequence);
    states_.emplace(id, std::move(s));
  }
  for (IdType id : cancels) {
    auto it = states_.find(id);
    if (it == states_.end()) continue;
    // NOTE: a request in a micro-batch in flight keeps its blocks until the micro-batch is back:
    // the pipeline's later stages still write them.
    if (it->second->sequence.in_flight()) {
      held_cancels_.insert(id);
      continue;
    }
    FinishRequest(*it->second, FinishReason::kCancelled);
  }
}

void Executor::Impl::RunStep() {
  if (lookahead_) return RunStepAhead();
  while (static_cast<SizeType>(in_flight_.size()) < limits_.max_micro_batches && LaunchStep()) {
  }
  if (in_flight_.empty()) {
    // Nothing fits this instant (blocks held by requests being finished); wait for a change.
    std::unique_lock<std::mutex> lock(mu_);
    work_cv_.wait_for(lock, std::chrono::milliseconds(5));
    return;
  }
  CompleteStep();
}

bool Executor::Impl::LaunchStep() {
  InFlightStep f;
  f.start = std::chrono::steady_clock::now();
  profile_.Begin();
  f.step = scheduler_.Schedule();
  const executor::ScheduleResult& step = f.step;
  if (step.empty()) return false;
  const std::int64_t now = SteadyNowNs();
  for (const ScheduledItem& item : step.items) {
    RequestState& s = *states_.at(item.seq->id);
    if (s.first_scheduled_time_ns == 0) s.first_scheduled_time_ns = now;
  }
  model::StepInput& input = step_input_;
  scheduler_.BuildStepInput(step, &input);
  profile_.Mark(executor::StepProfile::kSchedule);
  f.on_device.assign(step.items.size(), false);
  const bool device_sampling = config_.device_sampling && runner_->supports_device_sampling();
  for (std::size_t i = 0; device_sampling && i < step.items.size(); ++i) {
    const ScheduledItem& item = step.items[i];
    RequestState& s = *states_.at(item.seq->id);
    // kAll steps (context logits) return their rows anyway: the host samples from the last one.
    if (!item.needs_sampling || item.logits != model::SequenceStep::Logits::kLast ||
        !executor::DeviceSamplingEligible(s.request)) {
      continue;
    }
    input.sequences[i].device_sampling = MakeDeviceSampling(s);
    input.sequences[i].logits = model::SequenceStep::Logits::kNone;
    f.on_device[i] = true;
  }
  profile_.Mark(executor::StepProfile::kSamplingInputs);
  if (Status launched = runner_->Launch(input); !launched.ok()) {
    // Refused before anything moved (model_runner.h): nothing of it is in flight.
    LOG_ERROR("executor: model step failed: {}", launched.ToString());
    scheduler_.OnStepDropped(step);
    for (const ScheduledItem& item : step.items) {
      EndRequest(*states_.at(item.seq->id), FinishReason::kNotFinished, launched);
    }
    return true;
  }
  f.micro_batch_id = num_launches_++ % limits_.max_micro_batches;
  in_flight_.push_back(std::move(f));
  return true;
}

void Executor::Impl::CompleteStep() {
  InFlightStep f = std::move(in_flight_.front());
  in_flight_.pop_front();
  const executor::ScheduleResult& step = f.step;
  const std::vector<bool>& on_device = f.on_device;
  Result<model::StepOutput> out = runner_->Complete();
  profile_.Mark(executor::StepProfile::kRunnerHost);
  if (out.ok()) profile_.AddRunnerTimes(out->device_wait_ms, out->device_ms);
  if (out.ok() && std::find(on_device.begin(), on_device.end(), true) != on_device.end() &&
      (out->sampled_tokens.size() != step.items.size() ||
       out->sampled_log_probs.size() != step.items.size())) {
    out = Internal("the model runner returned " + std::to_string(out->sampled_tokens.size()) +
                   " sampled tokens and " + std::to_string(out->sampled_log_probs.size()) +
                   " log-probs for a step of " + std::to_string(step.items.size()) +
                   " sequences with device sampling: expected one of each per sequence");
  }
  if (!out.ok()) {
    LOG_ERROR("executor: model step failed: {}", out.status().ToString());
    scheduler_.OnStepDropped(step);
    for (const ScheduledItem& item : step.items) {
      RequestState& s = *states_.at(item.seq->id);
      // An end held by the step before (its error first); lookahead: a request the next step
      // computes too fails when that step is back.
      if (!ApplyHeldEnd(s)) EndRequest(s, FinishReason::kNotFinished, out.status());
    }
    return;
  }
  scheduler_.OnStepComputed(step);
  const std::int64_t vocab = out->vocab_size;
  // The device's tokens of this step all arrived now: one clock read, not one a token.
  const std::int64_t step_done_ns = SteadyNowNs();
  for (std::size_t i = 0; i < step.items.size(); ++i) {
    const ScheduledItem& item = step.items[i];
    RequestState& s = *states_.at(item.seq->id);
    if (ApplyHeldEnd(s)) continue;  // cancelled, or ended by the step before (lookahead)
    if (on_device[i]) {
      AcceptDeviceToken(s, out->sampled_tokens[i], out->sampled_log_probs[i], vocab, step_done_ns);
      continue;
    }
    const std::size_t num_rows = item.logits == model::SequenceStep::Logits::kAll ? item.num_tokens
                                 : item.logits == model::SequenceStep::Logits::kLast ? 1
                                                                                     : 0;
    std::span<const float> rows(
        out->logits.data() + static_cast<std::size_t>(out->row_begin[i]) * vocab,
        num_rows * static_cast<std::size_t>(vocab));
    if (item.logits == model::SequenceStep::Logits::kAll &&
        s.request.output_config.return_context_logits) {
      CollectContextLogits(s, item, rows);
    }
    if (item.needs_sampling && num_rows > 0) {
      SampleItem(s, rows.last(static_cast<std::size_t>(vocab)));
    }
  }
  profile_.Mark(executor::StepProfile::kOutputs);
  const auto now = std::chrono::steady_clock::now();
  // With lookahead a step is launched while the one before it still runs: its latency counts from
  // when that one came back, so that the records still add up to the wall time.
  const auto began = lookahead_ ? std::max(f.start, last_completion_) : f.start;
  last_completion_ = now;
  const double ms = std::chrono::duration<double, std::milli>(now - began).count();
  RecordIteration(step, ms, f.micro_batch_id);
  if (profile_.enabled()) {
    profile_.Mark(executor::StepProfile::kStats);
    profile_.EndStep(static_cast<std::int64_t>(step.items.size()), step.stats.num_context_tokens);
  }
}

void Executor::Impl::DrainInFlight() {
  // Every rank of a split engine launched these steps, so each is completed here too; the
  // requests themselves are cancelled by Shutdown.
  while (!in_flight_.empty()) {
    if (Result<model::StepOutput> out = runner_->Complete(); !out.ok()) {
      LOG_WARN("executor: a micro-batch in flight at shutdown failed: {}", out.status().ToString());
    }
    in_flight_.pop_front();
  }
  held_cancels_.clear();
}

void Executor::Impl::CollectContextLogits(RequestState& s, const ScheduledItem& item,
                                          std::span<const float> rows) {
  const std::size_t vocab = static_cast<std::size_t>(runner_->config().vocab_size);
  for (SizeType j = 0; j < item.num_tokens; ++j) {
    const SizeType pos = item.num_cached + j;
    const auto have = static_cast<SizeType>(s.context_logits.size() / vocab);
    // Only the first pass over each prompt position counts (a resume after a pause recomputes it).
    if (pos >= s.sequence.prompt_len || pos != have) continue;
    auto row = rows.subspan(static_cast<std::size_t>(j) * vocab, vocab);
    s.context_logits.insert(s.context_logits.end(), row.begin(), row.end());
  }
}

model::DeviceSampling Executor::Impl::MakeDeviceSampling(RequestState& s) {
  auto it = device_inputs_.find(s.sequence.id);
  if (it == device_inputs_.end()) {
    it = device_inputs_.emplace(s.sequence.id, executor::DeviceSamplingInputs(s.request)).first;
  }
  return it->second.Next(s.request, s.sequence.prompt(), s.sequence.generated(), s.sampler,
                         runner_->config().vocab_size, config_.normalize_log_probs);
}

void Executor::Impl::AcceptDeviceToken(RequestState& s, TokenIdType token, float log_prob,
                                       std::int64_t vocab, std::int64_t now_ns) {
  // The texts of the host sampler's CheckSamplable (sampler.cc), so both paths fail alike.
  const auto fail = [&](const Status& error) { EndRequest(s, FinishReason::kNotFinished, error); };
  if (token == model::StepOutput::kSampledNotFinite) {
    return fail(
        Internal("a logit is nan or +inf after bias, temperature and penalties: cannot "
                 "sample"));
  }
  if (token == model::StepOutput::kSampledAllBanned) {
    return fail(Internal("every token of the vocabulary (" + std::to_string(vocab) +
                         ") is banned (bad words, min_tokens or -inf logits): cannot sample"));
  }
  if (token < 0 || token >= vocab) {
    return fail(Internal("the device sampled token " + std::to_string(token) + " for request " +
                         std::to_string(s.sequence.id) + ": outside the vocabulary [0, " +
                         std::to_string(vocab) + ")"));
  }
  AcceptToken(s, token, log_prob, {}, now_ns);
}

void Executor::Impl::SampleItem(RequestState& s, std::span<const float> row) {
  executor::Sequence& seq = s.sequence;
  std::vector<float> logits(row.begin(), row.end());
  auto sampled = sampling::Sample(logits, s.request.sampling_config,
                                  sampling::MakeDecodeContext(s.request, seq.generated()),
                                  s.sampler, config_.normalize_log_probs);
  if (!sampled.ok()) return EndRequest(s, FinishReason::kNotFinished, sampled.status());
  AcceptToken(s, sampled->token, sampled->log_prob, row, SteadyNowNs());
}

void Executor::Impl::AcceptToken(RequestState& s, TokenIdType token, float log_prob,
                                 std::span<const float> row, std::int64_t now_ns) {
  executor::Sequence& seq = s.sequence;
  const sampling::StepOutcome outcome =
      sampling::EvaluateStep(token, seq.known_generated(), s.criteria);
  if (s.first_token_time_ns == 0) s.first_token_time_ns = now_ns;
  s.last_token_time_ns = now_ns;
  if (seq.token_pending) {  // lookahead: the token takes its placeholder's place
    seq.tokens.pop_back();
    seq.token_pending = false;
  }
  if (outcome.append_token) {
    seq.AppendToken(token);
    s.log_probs.push_back(log_prob);
    s.cum_log_prob += log_prob;
    if (s.request.output_config.return_generation_logits) {
      s.generation_logits.insert(s.generation_logits.end(), row.begin(), row.end());
    }
  }
  if (outcome.finish_reason != FinishReason::kNotFinished) {
    return EndRequest(s, outcome.finish_reason, Status::Ok());
  }
  if (s.request.streaming) Emit(executor::MakeStreamingResponse(s, false, vocab_size()));
}

void Executor::Impl::PublishKvStats() {
  const KvCacheStats stats = blocks_.Stats();
  std::lock_guard<std::mutex> lock(mu_);
  kv_stats_snapshot_ = stats;
}

void Executor::Impl::FinishRequest(RequestState& s, FinishReason reason) {
  if (s.sequence.token_pending) {  // a placeholder whose token never came (a cancel)
    s.sequence.tokens.pop_back();
    s.sequence.token_pending = false;
  }
  held_cancels_.erase(s.sequence.id);
  held_ends_.erase(s.sequence.id);
  s.finish_reason = reason;
  scheduler_.Finish(&s.sequence);  // frees the blocks now; completes s.sequence.kv_stats
  // Before the response: whoever sees the final response also sees the blocks back.
  PublishKvStats();
  Emit(s.request.streaming ? executor::MakeStreamingResponse(s, true, vocab_size())
                           : executor::MakeFinalResponse(s, vocab_size()));
  device_inputs_.erase(s.sequence.id);
  states_.erase(s.sequence.id);
}

void Executor::Impl::FailRequest(RequestState& s, const Status& error) {
  held_cancels_.erase(s.sequence.id);
  held_ends_.erase(s.sequence.id);
  scheduler_.Cancel(&s.sequence);
  PublishKvStats();
  Emit(executor::MakeErrorResponse(s.sequence.id, error));
  device_inputs_.erase(s.sequence.id);
  states_.erase(s.sequence.id);
}

void Executor::Impl::RecordIteration(const executor::ScheduleResult& step, double latency_ms,
                                     std::int64_t micro_batch_id) {
  IterationStats st;
  st.micro_batch_id = micro_batch_id;
  st.timestamp_ns = SteadyNowNs();
  st.iter = iteration_++;
  st.iter_latency_ms = latency_ms;
  const executor::ScheduleStats& ss = step.stats;
  // After the step: requests that finished in it no longer count as active.
  st.num_active_requests = scheduler_.num_running() + scheduler_.num_paused();
  st.max_num_active_requests = limits_.max_batch_size;
  st.num_scheduled_requests = ss.num_scheduled;
  st.num_context_requests = ss.num_context;
  st.num_gen_requests = ss.num_generation;
  st.num_paused_requests = scheduler_.num_paused();
  st.total_context_tokens = ss.num_context_tokens;
  if (std::string_view(runner_->device_name()) == "cpu") {
    st.cpu_mem_usage = runner_->memory_bytes();
  } else {
    st.gpu_mem_usage = runner_->memory_bytes();
  }
  st.kv_cache_stats = blocks_.Stats();
  std::lock_guard<std::mutex> lock(mu_);
  st.num_queued_requests = static_cast<std::int64_t>(incoming_.size()) + scheduler_.num_waiting();
  num_queued_ = st.num_queued_requests;
  kv_stats_snapshot_ = st.kv_cache_stats;
  iteration_stats_.push_back(st);
  while (iteration_stats_.size() >
         static_cast<std::size_t>(std::max(config_.iter_stats_max_iterations, 1))) {
    iteration_stats_.pop_front();
  }
}

}  // namespace inflight
