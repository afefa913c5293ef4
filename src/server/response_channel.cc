#include "server/response_channel.h"

#include <algorithm>

#include "common/logging.h"
#include "server/inference_request.h"
#include "triton/core/tritonserver.h"

namespace inflight::server {

void RequestTracker::AddRequest(InferenceRequest* request) {
  std::lock_guard lock(mu_);
  requests_[request] = true;
}

void RequestTracker::RemoveRequest(InferenceRequest* request) {
  std::lock_guard lock(mu_);
  requests_.erase(request);
  if (requests_.empty() && channels_.empty()) idle_cv_.notify_all();
}

void RequestTracker::AddChannel(const std::shared_ptr<ResponseChannel>& channel) {
  std::lock_guard lock(mu_);
  channels_[channel.get()] = channel;
}

void RequestTracker::RemoveChannel(ResponseChannel* channel) {
  std::lock_guard lock(mu_);
  channels_.erase(channel);
  if (requests_.empty() && channels_.empty()) idle_cv_.notify_all();
}

size_t RequestTracker::NumInflight() const {
  std::lock_guard lock(mu_);
  return std::max(requests_.size(), channels_.size());
}

bool RequestTracker::WaitIdle(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_until(lock, deadline,
                             [&] { return requests_.empty() && channels_.empty(); });
}

void RequestTracker::CancelAll() {
  std::vector<std::shared_ptr<ResponseChannel>> open;
  {
    std::lock_guard lock(mu_);
    for (auto& [ptr, weak] : channels_) {
      if (auto channel = weak.lock()) open.push_back(std::move(channel));
    }
  }
  for (auto& channel : open) channel->Cancel();
}

void RequestTracker::FailAll(const Status& status) {
  std::vector<std::shared_ptr<ResponseChannel>> open;
  {
    std::lock_guard lock(mu_);
    for (auto& [ptr, weak] : channels_) {
      if (auto channel = weak.lock()) open.push_back(std::move(channel));
    }
  }
  for (auto& channel : open) channel->Fail(status);
}

std::vector<InferenceRequest*> RequestTracker::TakeUnreleased() {
  std::lock_guard lock(mu_);
  std::vector<InferenceRequest*> out;
  for (auto& [request, unused] : requests_) out.push_back(request);
  return out;
}

std::shared_ptr<ResponseChannel> ResponseChannel::Create(ChannelInfo info,
                                                         ResponseCallback callback,
                                                         std::shared_ptr<RequestTracker> tracker) {
  std::shared_ptr<ResponseChannel> channel(
      new ResponseChannel(std::move(info), std::move(callback), std::move(tracker)));
  if (channel->tracker_) channel->tracker_->AddChannel(channel);
  return channel;
}

ResponseChannel::ResponseChannel(ChannelInfo info, ResponseCallback callback,
                                 std::shared_ptr<RequestTracker> tracker)
    : info_(std::move(info)), callback_(std::move(callback)), tracker_(std::move(tracker)) {}

ResponseChannel::~ResponseChannel() {
  {
    std::lock_guard lock(mu_);
    if (!backend_final_ && !disarmed_) {
      held_.reset();
      InferResponse response = MakeResponse({}, {});
      response.error =
          Internal("the backend released request '" + info_.request_id + "' of model '" +
                   info_.model_name + "' without sending a final response");
      DeliverLocked(std::move(response));
    }
  }
  if (tracker_) tracker_->RemoveChannel(this);
}

void ResponseChannel::Disarm() {
  std::lock_guard lock(mu_);
  disarmed_ = true;
}

InferResponse ResponseChannel::MakeResponse(
    std::vector<Tensor> outputs, std::map<std::string, ParameterValue> parameters) const {
  InferResponse response;
  response.model_name = info_.model_name;
  response.model_version = info_.model_version;
  response.id = info_.request_id;
  response.parameters = std::move(parameters);
  if (info_.requested_outputs.empty()) {
    response.outputs = std::move(outputs);
  } else {
    for (auto& t : outputs) {
      if (std::find(info_.requested_outputs.begin(), info_.requested_outputs.end(), t.name) !=
          info_.requested_outputs.end()) {
        response.outputs.push_back(std::move(t));
      }
    }
  }
  return response;
}

void ResponseChannel::DeliverLocked(InferResponse response) {
  if (client_done_) return;
  if (response.is_final || response.error) {
    response.is_final = true;
    client_done_ = true;
  }
  if (!callback_) return;
  // NOTE: the callback runs under mu_ so that one request's responses reach it in send order and
  // never concurrently; callbacks must not call back into this channel except Cancel().
  try {
    callback_(std::move(response));
  } catch (const std::exception& e) {
    LOG_ERROR("response callback of model '{}' threw: {}", info_.model_name, e.what());
  }
}

void ResponseChannel::MarkFinalLocked() {
  backend_final_ = true;
  if (tracker_) tracker_->RemoveChannel(this);
}

Status ResponseChannel::Send(std::vector<Tensor> outputs,
                             std::map<std::string, ParameterValue> parameters, uint32_t flags,
                             std::optional<Status> error) {
  const bool final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  std::lock_guard lock(mu_);
  if (backend_final_) {
    return InvalidArgument("response of request '" + info_.request_id + "' for model '" +
                           info_.model_name +
                           "' sent after the request was completed (FINAL was already sent)");
  }
  if (!info_.decoupled && num_responses_ > 0) {
    return InvalidArgument(
        "model '" + info_.model_name +
        "' is not decoupled: only one response may be sent per request (request '" +
        info_.request_id + "')");
  }
  ++num_responses_;
  InferResponse response = MakeResponse(std::move(outputs), std::move(parameters));
  if (error) response.error = *error;
  if (final) {
    response.is_final = true;
    DeliverLocked(std::move(response));
    MarkFinalLocked();
  } else if (!info_.decoupled && !response.error) {
    held_ = std::move(response);
  } else {
    DeliverLocked(std::move(response));
  }
  return Status::Ok();
}

Status ResponseChannel::SendFlags(uint32_t flags) {
  if ((flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) == 0) {
    return InvalidArgument("TRITONBACKEND_ResponseFactorySendFlags: flags " +
                           std::to_string(flags) +
                           " do not include TRITONSERVER_RESPONSE_COMPLETE_FINAL (1), the only "
                           "flag it accepts");
  }
  std::lock_guard lock(mu_);
  if (backend_final_) {
    return InvalidArgument("FINAL flag sent twice for request '" + info_.request_id +
                           "' of model '" + info_.model_name + "'");
  }
  InferResponse response;
  if (held_) {
    response = std::move(*held_);
    held_.reset();
  } else {
    response = MakeResponse({}, {});
  }
  response.is_final = true;
  DeliverLocked(std::move(response));
  MarkFinalLocked();
  return Status::Ok();
}

bool ResponseChannel::Fail(const Status& status) {
  std::lock_guard lock(mu_);
  if (backend_final_) return false;
  held_.reset();
  InferResponse response = MakeResponse({}, {});
  response.error = status;
  DeliverLocked(std::move(response));
  MarkFinalLocked();
  return true;
}

bool ResponseChannel::IsFinal() const {
  std::lock_guard lock(mu_);
  return backend_final_;
}

}  // namespace inflight::server
