// The request handlers behind HttpService: each converts one endpoint's wire format to the Server
// API and back. Health, metadata and repository endpoints live in http_handlers.cc, inference ones
// in http_inference_handlers.cc. Handlers run on io threads and never wait: inference answers come
// back through the HttpExchange from the core's threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/http/http_message.h"
#include "server/server_api.h"

namespace inflight::server::http {

class HttpExchange;
class HttpRouter;

class HttpHandlers {
 public:
  // `max_input_bytes` (--http-max-input-size) also bounds a compressed body once inflated.
  HttpHandlers(Server& server, std::size_t max_input_bytes)
      : server_(server), max_input_bytes_(max_input_bytes) {}

  void Register(HttpRouter& router);
  // The server is stopping: /v2/health/ready answers 400 from now on.
  void BeginStop() { stopping_ = true; }

 private:
  HttpReply HandleServerMetadata();
  HttpReply HandleModelMetadata(const HttpRequest& req);
  HttpReply HandleModelReady(const HttpRequest& req);
  HttpReply HandleModelConfig(const HttpRequest& req);
  HttpReply HandleModelStats(const HttpRequest& req);
  HttpReply HandleRepositoryIndex(const HttpRequest& req);

  void HandleInfer(const HttpRequest& req, const std::shared_ptr<HttpExchange>& exchange);
  void HandleGenerate(const HttpRequest& req, const std::shared_ptr<HttpExchange>& exchange);
  void HandleGenerateStream(const HttpRequest& req, const std::shared_ptr<HttpExchange>& exchange);
  Result<InferRequest> ParseGenerateBody(const HttpRequest& req);

  Server& server_;
  std::size_t max_input_bytes_;
  std::atomic<bool> stopping_{false};
};

// Shared by both handler files.
HttpReply ErrorReply(const Status& status);
// The model version in the URL (`/versions/<v>`, group `index` of the route): -1 when absent.
Result<std::int64_t> ParseVersion(const HttpRequest& req, std::size_t index);
// The model name (group 1 of the per-model routes).
const std::string& ModelName(const HttpRequest& req);

}  // namespace inflight::server::http
