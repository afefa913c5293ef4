// Hands a request's responses from the core's threads to the HTTP worker that waits for them.
// Shared by the core callback and the handler, so a response that arrives after the client left
// lands harmlessly.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "server/server_api.h"

namespace inflight::server::http {

class ResponseChannel {
 public:
  void Push(InferResponse response) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(response));
    }
    cv_.notify_one();
  }

  // The next response, or nullopt when none came within `timeout`.
  std::optional<InferResponse> Pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [this] { return !queue_.empty(); })) return std::nullopt;
    InferResponse response = std::move(queue_.front());
    queue_.pop_front();
    return response;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<InferResponse> queue_;
};

// A response that only carries the FINAL flag (a decoupled model's closing
// TRITONBACKEND_ResponseFactorySendFlags): it ends the request but is not a response the client
// sees.
inline bool IsFlagOnly(const InferResponse& response) {
  return response.is_final && !response.error && response.outputs.empty();
}

inline ResponseCallback FeedChannel(std::shared_ptr<ResponseChannel> channel) {
  return [channel = std::move(channel)](InferResponse response) {
    channel->Push(std::move(response));
  };
}

inline bool IsLast(const InferResponse& response) {
  return response.is_final || response.error.has_value();
}

}  // namespace inflight::server::http
