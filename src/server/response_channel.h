// Where a request's responses go, and the bookkeeping that enforces Triton's response rules:
// a non-decoupled model answers exactly once (FINAL may come with the response or after it); a
// decoupled one sends 0..N responses, then FINAL exactly once. The channel outlives the request
// object (a backend may answer through a response factory after TRITONBACKEND_RequestRelease).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/server_api.h"

namespace inflight::server {

class ResponseChannel;
class InferenceRequest;

// Per model: the requests a backend has not released and the channels whose FINAL has not come, so
// that shutdown can wait for them, cancel them and, at the end, answer and free what is left.
class RequestTracker {
 public:
  void AddRequest(InferenceRequest* request);
  void RemoveRequest(InferenceRequest* request);
  void AddChannel(const std::shared_ptr<ResponseChannel>& channel);
  void RemoveChannel(ResponseChannel* channel);

  size_t NumInflight() const;
  // True when nothing is in flight before `deadline`.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) const;
  void CancelAll();
  // Answers every open channel with `status` (and marks it final).
  void FailAll(const Status& status);
  // Requests the backend never released; the caller deletes them.
  std::vector<InferenceRequest*> TakeUnreleased();

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable idle_cv_;
  std::unordered_map<InferenceRequest*, bool> requests_;
  std::unordered_map<ResponseChannel*, std::weak_ptr<ResponseChannel>> channels_;
};

struct ChannelInfo {
  std::string model_name;
  std::int64_t model_version = 0;
  std::string request_id;
  bool decoupled = false;
  // Outputs the client asked for; empty: every output the backend produces is delivered.
  std::vector<std::string> requested_outputs;
};

class ResponseChannel {
 public:
  // Registers itself with `tracker` (may be null) until FINAL.
  static std::shared_ptr<ResponseChannel> Create(ChannelInfo info, ResponseCallback callback,
                                                 std::shared_ptr<RequestTracker> tracker);
  // A channel destroyed before FINAL (the backend released the request and dropped every factory
  // without completing it) answers the client with an error: nobody else ever could.
  ~ResponseChannel();

  // From the backend (TRITONBACKEND_ResponseSend). `error` set: an error response. Returns the
  // error the backend gets back for a send that breaks the rules.
  Status Send(std::vector<Tensor> outputs, std::map<std::string, ParameterValue> parameters,
              uint32_t flags, std::optional<Status> error);
  // TRITONBACKEND_ResponseFactorySendFlags.
  Status SendFlags(uint32_t flags);
  // From the core: answers with `status` unless the backend already sent FINAL; marks it final.
  // Returns false when it was already final.
  bool Fail(const Status& status);

  // The request was refused before it reached a backend: the caller reports that error itself, so
  // the channel must not answer when it is destroyed.
  void Disarm();

  void Cancel() { cancelled_.store(true); }
  bool IsCancelled() const { return cancelled_.load(); }
  bool IsFinal() const;
  const ChannelInfo& info() const { return info_; }

 private:
  ResponseChannel(ChannelInfo info, ResponseCallback callback,
                  std::shared_ptr<RequestTracker> tracker);
  InferResponse MakeResponse(std::vector<Tensor> outputs,
                             std::map<std::string, ParameterValue> parameters) const;
  // Called with mu_ held.
  void DeliverLocked(InferResponse response);
  void MarkFinalLocked();

  const ChannelInfo info_;
  ResponseCallback callback_;
  std::shared_ptr<RequestTracker> tracker_;
  std::atomic<bool> cancelled_{false};

  mutable std::mutex mu_;
  bool backend_final_ = false;  // FINAL seen (from the backend or the core)
  bool client_done_ = false;    // the callback got its last response
  bool disarmed_ = false;
  int num_responses_ = 0;
  // Non-decoupled: a response sent without FINAL waits here for the FINAL flag.
  std::optional<InferResponse> held_;
};

}  // namespace inflight::server
