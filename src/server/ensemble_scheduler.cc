#include "server/ensemble_scheduler.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "common/logging.h"
#include "server/backend_objects.h"
#include "server/inference_request.h"
#include "server/response_channel.h"

namespace inflight::server {

namespace {

bool DeclaresInput(const inference::ModelConfig& c, const std::string& name) {
  return std::any_of(c.input().begin(), c.input().end(),
                     [&](const auto& in) { return in.name() == name; });
}

bool DeclaresOutput(const inference::ModelConfig& c, const std::string& name) {
  return std::any_of(c.output().begin(), c.output().end(),
                     [&](const auto& out) { return out.name() == name; });
}

// The tensors one line of data flow has seen, and the steps it has run.
struct Flow {
  std::map<std::string, std::shared_ptr<const Tensor>> tensors;
  std::set<size_t> launched;
  // Steps whose answer for this flow is complete: a tensor they did not produce will not come.
  std::set<size_t> finished;
  int running = 0;
  bool emitted = false;
};

class EnsembleContext : public std::enable_shared_from_this<EnsembleContext> {
 public:
  EnsembleContext(const EnsembleScheduler* scheduler, std::shared_ptr<ResponseChannel> out,
                  InferRequest& request)
      : sched_(scheduler),
        out_(std::move(out)),
        id_(request.id),
        parameters_(request.parameters),
        start_ns_(NowNs()) {
    const auto& config = sched_->model()->config;
    if (request.requested_outputs.empty()) {
      for (const auto& o : config.output()) wanted_.push_back(o.name());
    } else {
      wanted_ = request.requested_outputs;
    }
  }

  void Start(InferRequest request) {
    auto root = std::make_shared<Flow>();
    for (auto& t : request.inputs) {
      const std::string name = t.name;
      root->tensors[name] = std::make_shared<const Tensor>(std::move(t));
    }
    std::vector<Launch> launches;
    {
      std::lock_guard lock(mu_);
      launches = CollectReadyLocked(root);
      if (launches.empty()) {
        FailLocked(InvalidArgument("ensemble '" + sched_->model()->name +
                                   "' has no step whose inputs are available"));
        MaybeFinishLocked();
      }
    }
    RunLaunches(std::move(launches));
  }

  void Cancel() {
    cancelled_.store(true);
    out_->Cancel();
    std::vector<std::shared_ptr<InflightRequest>> handles;
    {
      std::lock_guard lock(handles_mu_);
      handles = handles_;
    }
    for (auto& h : handles) h->Cancel();
  }

 private:
  struct Launch {
    std::shared_ptr<Flow> flow;
    size_t step;
    InferRequest request;
  };

  bool StepReady(const Flow& flow, size_t s) const {
    if (flow.launched.count(s)) return false;
    const auto& step = sched_->steps()[s];
    for (const auto& [step_input, tensor] : step.spec.input_map()) {
      if (!DeclaresInput(step.model_config, step_input)) continue;
      if (flow.tensors.count(tensor) != 0) continue;
      // Missing: wait for its producer, unless the producer finished without it (an optional output
      // such as preprocessing's OUT_PROMPT_TABLE_EXTRA_IDS); the step then runs without the input.
      auto producer = sched_->produced().find(tensor);
      if (producer != sched_->produced().end() && flow.finished.count(producer->second) == 0)
        return false;
    }
    return true;
  }

  std::vector<Launch> CollectReadyLocked(const std::shared_ptr<Flow>& flow) {
    std::vector<Launch> launches;
    if (failed_) return launches;
    for (size_t s = 0; s < sched_->steps().size(); ++s) {
      if (!StepReady(*flow, s)) continue;
      const auto& step = sched_->steps()[s];
      InferRequest r;
      r.model_name = step.spec.model_name();
      r.model_version = step.spec.model_version();
      r.id = id_;
      r.parameters = parameters_;
      for (const auto& [step_input, tensor] : step.spec.input_map()) {
        if (!DeclaresInput(step.model_config, step_input)) continue;
        auto it = flow->tensors.find(tensor);
        if (it == flow->tensors.end()) continue;  // an optional ensemble input left out
        Tensor t = *it->second;
        t.name = step_input;
        r.inputs.push_back(std::move(t));
      }
      for (const auto& [step_output, tensor] : step.spec.output_map()) {
        if (DeclaresOutput(step.model_config, step_output))
          r.requested_outputs.push_back(step_output);
      }
      flow->launched.insert(s);
      ++flow->running;
      ++outstanding_;
      launches.push_back(Launch{flow, s, std::move(r)});
    }
    return launches;
  }

  void RunLaunches(std::vector<Launch> launches) {
    for (auto& l : launches) {
      auto self = shared_from_this();
      auto flow = l.flow;
      const size_t step = l.step;
      if (cancelled_.load()) {
        InferResponse cancelled;
        cancelled.error = Cancelled("ensemble request '" + id_ + "' was cancelled");
        cancelled.is_final = true;
        OnStepResponse(flow, step, std::move(cancelled));
        continue;
      }
      auto handle = sched_->launcher()(std::move(l.request), [self, flow, step](InferResponse r) {
        self->OnStepResponse(flow, step, std::move(r));
      });
      if (!handle.ok()) {
        InferResponse failed;
        failed.error = handle.status();
        failed.is_final = true;
        OnStepResponse(flow, step, std::move(failed));
        continue;
      }
      {
        std::lock_guard lock(handles_mu_);
        handles_.push_back(handle.value());
      }
      if (cancelled_.load()) handle.value()->Cancel();
    }
  }

  void OnStepResponse(const std::shared_ptr<Flow>& flow, size_t s, InferResponse r) {
    std::vector<Launch> launches;
    {
      std::lock_guard lock(mu_);
      const auto& step = sched_->steps()[s];
      if (r.error) {
        FailLocked(Status(r.error->code(), "in ensemble '" + sched_->model()->name + "', step '" +
                                               step.spec.model_name() +
                                               "': " + r.error->message()));
      } else if (!failed_ && !r.outputs.empty()) {
        std::map<std::string, std::shared_ptr<const Tensor>> produced;
        for (auto& t : r.outputs) {
          auto it = step.spec.output_map().find(t.name);
          if (it == step.spec.output_map().end()) continue;
          t.name = it->second;
          produced[it->second] = std::make_shared<const Tensor>(std::move(t));
        }
        if (step.decoupled) {
          auto child = std::make_shared<Flow>();
          child->tensors = flow->tensors;
          child->launched = flow->launched;
          child->finished = flow->finished;
          child->finished.insert(s);  // this response is all the child flow gets from step s
          for (auto& [name, t] : produced) child->tensors[name] = t;
          auto more = CollectReadyLocked(child);
          if (more.empty()) MaybeEmitLocked(*child);
          for (auto& l : more) launches.push_back(std::move(l));
        } else {
          for (auto& [name, t] : produced) flow->tensors[name] = t;
        }
      }
      if (r.is_final || r.error) {
        // A decoupled step's tensors only ever reach child flows; in this flow its consumers keep
        // waiting (and never run) rather than running without them.
        if (!step.decoupled) flow->finished.insert(s);
        --flow->running;
        --outstanding_;
        auto more = CollectReadyLocked(flow);
        if (more.empty() && flow->running == 0) MaybeEmitLocked(*flow);
        for (auto& l : more) launches.push_back(std::move(l));
      }
      if (launches.empty()) MaybeFinishLocked();
    }
    RunLaunches(std::move(launches));
  }

  void MaybeEmitLocked(Flow& flow) {
    if (failed_ || flow.emitted || flow.running > 0) return;
    std::vector<Tensor> outputs;
    for (const auto& name : wanted_) {
      auto it = flow.tensors.find(name);
      if (it != flow.tensors.end() && sched_->produced().count(name))
        outputs.push_back(*it->second);
    }
    if (outputs.empty()) return;
    flow.emitted = true;
    emitted_any_ = true;
    Status st = out_->Send(std::move(outputs), SequenceParameters(), 0, std::nullopt);
    if (!st.ok()) LOG_WARN("ensemble '{}': {}", sched_->model()->name, st.message());
  }

  // Triton's ensemble scheduler adds the request's sequence_id, sequence_start and sequence_end to
  // every response carrying a composing model's tensors (core ensemble_scheduler.cc,
  // CheckAndSetEnsembleOutput): the `"sequence_id": 0, "sequence_start": false` lines of
  // tensorrtllm_backend's README answers. A string id stays a string, as there.
  std::map<std::string, ParameterValue> SequenceParameters() const {
    std::map<std::string, ParameterValue> out{
        {"sequence_id", std::int64_t{0}}, {"sequence_start", false}, {"sequence_end", false}};
    for (const char* key : {"sequence_id", "sequence_start", "sequence_end"}) {
      if (auto it = parameters_.find(key); it != parameters_.end()) out[key] = it->second;
    }
    return out;
  }

  void MaybeFinishLocked() {
    if (finished_ || outstanding_ > 0) return;
    finished_ = true;
    if (!failed_) {
      if (!emitted_any_ && !out_->info().decoupled) {
        FailLocked(Internal("ensemble '" + sched_->model()->name +
                            "' finished without producing any of its outputs"));
      } else {
        (void)out_->SendFlags(TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      }
    }
    // A cancelled ensemble is a failure with reason CANCELED even when its steps ended cleanly (a
    // cancelled LLM step sends its last tokens as a final response), as the cancelled steps count.
    const bool cancelled = cancelled_.load();
    sched_->model()->stats->ReportOutcome(
        !failed_ && !cancelled, start_ns_, NowNs(),
        cancelled ? FailureReason::kCanceled : FailureReason::kBackend);
  }

  void FailLocked(const Status& status) {
    if (failed_) return;
    failed_ = true;
    out_->Fail(status);
    // Stop the other steps early; their answers are ignored from now on.
    std::vector<std::shared_ptr<InflightRequest>> handles;
    {
      std::lock_guard lock(handles_mu_);
      handles = handles_;
    }
    for (auto& h : handles) h->Cancel();
  }

  const EnsembleScheduler* sched_;
  std::shared_ptr<ResponseChannel> out_;
  const std::string id_;
  const std::map<std::string, ParameterValue> parameters_;
  const uint64_t start_ns_;
  std::vector<std::string> wanted_;

  std::mutex mu_;  // NOTE: taken bottom-up (a step's callback); never held while launching steps
  int outstanding_ = 0;
  bool failed_ = false;
  bool finished_ = false;
  bool emitted_any_ = false;

  std::atomic<bool> cancelled_{false};
  std::mutex handles_mu_;  // leaf lock: only taken top-down, never while mu_ of a child is needed
  std::vector<std::shared_ptr<InflightRequest>> handles_;
};

// What a caller of EnsembleScheduler::Infer holds to cancel the ensemble. NOTE: weak, as the core's
// handle of a model's request is: callers keep their handle until the final response (the HTTP
// exchange does), and the context holds the response channel whose callback holds that caller, so
// a strong handle made a cycle that kept every ensemble request's objects (and its HTTP
// connection) alive for good. The context lives as long as its steps' callbacks hold it.
class EnsembleHandle : public InflightRequest {
 public:
  explicit EnsembleHandle(const std::shared_ptr<EnsembleContext>& context) : context_(context) {}
  void Cancel() override {
    if (auto context = context_.lock()) context->Cancel();
  }

 private:
  std::weak_ptr<EnsembleContext> context_;
};

}  // namespace

EnsembleScheduler::EnsembleScheduler(Model* ensemble, std::vector<EnsembleStep> steps,
                                     StepLauncher launcher)
    : model_(ensemble), steps_(std::move(steps)), launcher_(std::move(launcher)) {
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (const auto& [step_output, tensor] : steps_[s].spec.output_map()) produced_[tensor] = s;
  }
}

Result<std::shared_ptr<InflightRequest>> EnsembleScheduler::Infer(InferRequest request,
                                                                  ResponseCallback callback) {
  ChannelInfo info;
  info.model_name = model_->name;
  info.model_version = model_->version;
  info.request_id = request.id;
  info.decoupled = model_->decoupled;
  auto channel = ResponseChannel::Create(std::move(info), std::move(callback), model_->tracker);
  auto context = std::make_shared<EnsembleContext>(this, channel, request);
  auto handle = std::make_shared<EnsembleHandle>(context);
  context->Start(std::move(request));
  return std::static_pointer_cast<InflightRequest>(handle);
}

Status ValidateEnsemble(const inference::ModelConfig& ensemble,
                        const std::vector<EnsembleStep>& steps) {
  std::set<std::string> produced;
  for (const auto& step : steps) {
    const auto& name = step.spec.model_name();
    for (const auto& [step_input, tensor] : step.spec.input_map()) {
      if (!DeclaresInput(step.model_config, step_input)) {
        return InvalidArgument("ensemble '" + ensemble.name() + "' step '" + name +
                               "': input_map key '" + step_input + "' is not an input of model '" +
                               name + "'");
      }
    }
    for (const auto& in : step.model_config.input()) {
      if (!in.optional() && step.spec.input_map().count(in.name()) == 0) {
        return InvalidArgument("ensemble '" + ensemble.name() + "' step '" + name +
                               "': required input '" + in.name() + "' is not in its input_map");
      }
    }
    for (const auto& [step_output, tensor] : step.spec.output_map()) {
      if (!DeclaresOutput(step.model_config, step_output)) {
        return InvalidArgument("ensemble '" + ensemble.name() + "' step '" + name +
                               "': output_map key '" + step_output +
                               "' is not an output of model '" + name + "'");
      }
      produced.insert(tensor);
    }
  }
  for (const auto& out : ensemble.output()) {
    if (produced.count(out.name()) == 0) {
      return InvalidArgument("ensemble '" + ensemble.name() + "' output '" + out.name() +
                             "' is not produced by any step's output_map");
    }
  }
  return Status::Ok();
}

}  // namespace inflight::server
