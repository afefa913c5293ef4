#include "server/grpc/grpc_infer_calls.h"

#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/logging.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/grpc_tensors.h"

namespace inflight::server::grpc_frontend {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

// Texts as tritonserver's gRPC endpoint words them, so that clients matching on them keep working.
constexpr const char* kDecoupledUnaryMessage =
    "ModelInfer RPC doesn't support models with decoupled transaction policy";

bool IsLast(const InferResponse& r) {
  return r.is_final || r.error.has_value();
}
bool IsFlagOnly(const InferResponse& r) {
  return r.is_final && !r.error && r.outputs.empty();
}

// ---- ModelInfer ----

// What the core's callback and the reactor share; the reactor may be gone when a response arrives.
class UnaryState {
 public:
  UnaryState(::grpc::ServerUnaryReactor* reactor, ModelInferResponse* response)
      : reactor_(reactor), response_(response) {}

  void SetHandle(std::shared_ptr<InflightRequest> handle) {
    std::lock_guard lock(mu_);
    handle_ = std::move(handle);
    if (cancelled_) handle_->Cancel();
  }

  void OnResponse(InferResponse response) {
    std::lock_guard lock(mu_);
    if (reactor_ == nullptr) return;  // already answered (cancelled)
    if (response.error) return FinishLocked(ToGrpcStatus(*response.error));
    if (!IsFlagOnly(response)) {
      if (++num_responses_ > 1) {
        if (handle_) handle_->Cancel();
        return FinishLocked(::grpc::Status(
            ::grpc::StatusCode::INTERNAL,
            "model '" + response.model_name + "' sent more than one response to ModelInfer"));
      }
      Status st = ToModelInferResponse(response, *response_);
      if (!st.ok()) return FinishLocked(ToGrpcStatus(st));
    }
    if (!response.is_final) return;
    if (num_responses_ == 0) {
      return FinishLocked(::grpc::Status(::grpc::StatusCode::INTERNAL,
                                         "model '" + response.model_name + "' sent no response"));
    }
    FinishLocked(::grpc::Status::OK);
  }

  void OnCancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (handle_) handle_->Cancel();
    if (reactor_ != nullptr) {
      FinishLocked(
          ::grpc::Status(::grpc::StatusCode::CANCELLED, "the client cancelled the request"));
    }
  }

  void Finish(const ::grpc::Status& status) {
    std::lock_guard lock(mu_);
    if (reactor_ != nullptr) FinishLocked(status);
  }

 private:
  void FinishLocked(const ::grpc::Status& status) {
    reactor_->Finish(status);
    reactor_ = nullptr;  // the response message belongs to gRPC again
    response_ = nullptr;
  }

  std::mutex mu_;
  ::grpc::ServerUnaryReactor* reactor_;
  ModelInferResponse* response_;
  std::shared_ptr<InflightRequest> handle_;
  bool cancelled_ = false;
  int num_responses_ = 0;
};

class UnaryInferCall : public ::grpc::ServerUnaryReactor {
 public:
  UnaryInferCall(ModelInferResponse* response)
      : state_(std::make_shared<UnaryState>(this, response)) {}

  void Begin(Server& server, const ModelInferRequest& wire) {
    auto request = FromModelInferRequest(wire, nullptr);
    if (!request.ok()) return state_->Finish(ToGrpcStatus(request.status()));
    auto decoupled = server.ModelIsDecoupled(request->model_name, request->model_version);
    if (!decoupled.ok()) return state_->Finish(ToGrpcStatus(decoupled.status()));
    if (*decoupled) {
      return state_->Finish(::grpc::Status(::grpc::StatusCode::UNIMPLEMENTED,
                                           std::string(kDecoupledUnaryMessage) + " (model '" +
                                               request->model_name + "'; use ModelStreamInfer)"));
    }
    auto started = server.Infer(std::move(*request), [state = state_](InferResponse r) {
      state->OnResponse(std::move(r));
    });
    if (!started.ok()) return state_->Finish(ToGrpcStatus(started.status()));
    state_->SetHandle(std::move(*started));
  }

  void OnCancel() override { state_->OnCancel(); }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<UnaryState> state_;
};

// ---- ModelStreamInfer ----

using StreamReactor = ::grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>;

// Everything the reactor and the core's callbacks share. gRPC operations on the reactor
// (StartWrite, Finish) happen under mu_: the callback API never runs a reaction inline inside them.
class StreamState {
 public:
  explicit StreamState(StreamReactor* reactor) : reactor_(reactor) {}

  // A request about to go to the core: `serial` identifies it until its last response.
  std::uint64_t Open() {
    std::lock_guard lock(mu_);
    const std::uint64_t serial = next_serial_++;
    open_.emplace(serial, nullptr);
    return serial;
  }

  void SetHandle(std::uint64_t serial, std::shared_ptr<InflightRequest> handle) {
    std::lock_guard lock(mu_);
    auto it = open_.find(serial);
    if (it == open_.end()) return;  // it already ended
    it->second = std::move(handle);
    if (cancelled_) it->second->Cancel();
  }

  // The core refused the request (or it could not be converted): its error is its only answer.
  void Refuse(std::uint64_t serial, const Status& status, const std::string& model,
              const std::string& id) {
    std::lock_guard lock(mu_);
    open_.erase(serial);
    EnqueueLocked(ErrorMessage(status, model, "", id));
  }
  void RefuseUnopened(const Status& status, const std::string& model, const std::string& id) {
    std::lock_guard lock(mu_);
    EnqueueLocked(ErrorMessage(status, model, "", id));
  }

  void OnResponse(std::uint64_t serial, bool empty_final, InferResponse response) {
    std::lock_guard lock(mu_);
    const bool last = IsLast(response);
    if (last) open_.erase(serial);
    if (reactor_ == nullptr || finished_) return;
    if (response.error) {
      EnqueueLocked(ErrorMessage(*response.error, response.model_name,
                                 std::to_string(response.model_version), response.id));
      return;
    }
    if (IsFlagOnly(response) && !empty_final) return MaybeFinishLocked();
    ModelStreamInferResponse message;
    ModelInferResponse& out = *message.mutable_infer_response();
    Status st = ToModelInferResponse(response, out);
    if (!st.ok()) {
      message.set_error_message(st.message());
    } else {
      (*out.mutable_parameters())[kFinalResponse].set_bool_param(response.is_final);
    }
    EnqueueLocked(std::move(message));
  }

  void OnReadsDone() {
    std::lock_guard lock(mu_);
    reads_done_ = true;
    MaybeFinishLocked();
  }

  void OnWriteDone(bool ok) {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!queue_.empty()) queue_.pop_front();
    if (!ok) {
      // The call is over on the client's side (cancelled or disconnected): nobody reads the rest.
      CancelAllLocked();
      queue_.clear();
      FinishLocked(::grpc::Status(::grpc::StatusCode::CANCELLED, "the stream was cancelled"));
      return;
    }
    WriteNextLocked();
  }

  void OnCancel() {
    std::lock_guard lock(mu_);
    LOG_DEBUG("ModelStreamInfer cancelled by the client; cancelling {} request(s)", open_.size());
    CancelAllLocked();
    DropUnwrittenLocked();
    if (!writing_) {
      FinishLocked(
          ::grpc::Status(::grpc::StatusCode::CANCELLED, "the client cancelled the stream"));
    }
  }

  void OnDone() {
    std::lock_guard lock(mu_);
    CancelAllLocked();  // nothing can be delivered any more
    reactor_ = nullptr;
  }

 private:
  static ModelStreamInferResponse ErrorMessage(const Status& status, const std::string& model,
                                               const std::string& version, const std::string& id) {
    ModelStreamInferResponse message;
    message.set_error_message(status.message());
    ModelInferResponse& out = *message.mutable_infer_response();
    out.set_model_name(model);
    out.set_model_version(version);
    out.set_id(id);
    return message;
  }

  void EnqueueLocked(ModelStreamInferResponse message) {
    if (finished_ || cancelled_) return;
    queue_.push_back(std::move(message));
    WriteNextLocked();
  }

  void WriteNextLocked() {
    if (writing_ || finished_ || reactor_ == nullptr) return;
    if (queue_.empty()) return MaybeFinishLocked();
    writing_ = true;
    // std::deque keeps the front element where it is while others are pushed behind it.
    reactor_->StartWrite(&queue_.front());
  }

  void MaybeFinishLocked() {
    if (reads_done_ && open_.empty() && queue_.empty() && !writing_) {
      FinishLocked(::grpc::Status::OK);
    }
  }

  void FinishLocked(const ::grpc::Status& status) {
    if (finished_ || reactor_ == nullptr) return;
    finished_ = true;
    reactor_->Finish(status);
  }

  // Forgets the messages not yet handed to gRPC; the one being written stays until its write ends.
  void DropUnwrittenLocked() {
    if (writing_) {
      queue_.erase(queue_.begin() + 1, queue_.end());
    } else {
      queue_.clear();
    }
  }

  void CancelAllLocked() {
    cancelled_ = true;
    for (auto& [serial, handle] : open_) {
      if (handle) handle->Cancel();
    }
  }

  std::mutex mu_;
  StreamReactor* reactor_;
  std::deque<ModelStreamInferResponse> queue_;
  bool writing_ = false;
  bool reads_done_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  std::uint64_t next_serial_ = 0;
  std::unordered_map<std::uint64_t, std::shared_ptr<InflightRequest>> open_;
};

class StreamInferCall : public StreamReactor {
 public:
  explicit StreamInferCall(Server& server)
      : server_(server), state_(std::make_shared<StreamState>(this)) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return state_->OnReadsDone();  // the client half-closed (or the call ended)
    Submit();
    request_.Clear();
    StartRead(&request_);
  }
  void OnWriteDone(bool ok) override { state_->OnWriteDone(ok); }
  void OnCancel() override { state_->OnCancel(); }
  void OnDone() override {
    state_->OnDone();
    delete this;
  }

 private:
  void Submit() {
    const std::string model = request_.model_name();
    const std::string id = request_.id();
    bool empty_final = false;
    auto request = FromModelInferRequest(request_, &empty_final);
    if (!request.ok()) return state_->RefuseUnopened(request.status(), model, id);
    const std::uint64_t serial = state_->Open();
    auto started =
        server_.Infer(std::move(*request), [state = state_, serial, empty_final](InferResponse r) {
          state->OnResponse(serial, empty_final, std::move(r));
        });
    if (!started.ok()) return state_->Refuse(serial, started.status(), model, id);
    state_->SetHandle(serial, std::move(*started));
  }

  Server& server_;
  std::shared_ptr<StreamState> state_;
  ModelInferRequest request_;  // the read buffer; only touched between reads
};

}  // namespace

::grpc::ServerUnaryReactor* StartModelInfer(Server& server, ::grpc::CallbackServerContext*,
                                            const ModelInferRequest* request,
                                            ModelInferResponse* response) {
  auto* call = new UnaryInferCall(response);
  call->Begin(server, *request);
  return call;
}

StreamReactor* StartModelStreamInfer(Server& server, ::grpc::CallbackServerContext*) {
  return new StreamInferCall(server);
}

}  // namespace inflight::server::grpc_frontend
