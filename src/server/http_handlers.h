// The request handlers behind HttpService: each converts one endpoint's wire format to the Server
// API and back. Health, metadata and repository endpoints live in http_handlers.cc, inference ones
// in http_inference_handlers.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <httplib.h>

#include "common/status.h"
#include "server/server_api.h"

namespace inflight::server::http {

class HttpHandlers {
 public:
  explicit HttpHandlers(Server& server) : server_(server) {}

  void Register(httplib::Server& http, std::size_t max_input_bytes);
  // Makes every waiting handler and open stream give up (cancelling its request) within ~100 ms.
  void BeginStop() { stopping_ = true; }

 private:
  void HandleServerMetadata(httplib::Response& res);
  void HandleModelMetadata(const httplib::Request& req, httplib::Response& res);
  void HandleModelReady(const httplib::Request& req, httplib::Response& res);
  void HandleModelConfig(const httplib::Request& req, httplib::Response& res);
  void HandleModelStats(const httplib::Request& req, httplib::Response& res);
  void HandleRepositoryIndex(const httplib::Request& req, httplib::Response& res);

  void HandleInfer(const httplib::Request& req, httplib::Response& res);
  void HandleGenerate(const httplib::Request& req, httplib::Response& res);
  void HandleGenerateStream(const httplib::Request& req, httplib::Response& res);

  // Sends the request and waits for its last response. More than `max_responses` responses that
  // carry something (a flag-only FINAL does not count) cancels the request and fails with
  // `too_many_message`.
  Result<std::vector<InferResponse>> RunToEnd(InferRequest request, std::size_t max_responses,
                                              const std::string& too_many_message);
  Result<InferRequest> ParseGenerateBody(const httplib::Request& req);

  Server& server_;
  std::atomic<bool> stopping_{false};
};

// Shared by both handler files.
void SendJson(httplib::Response& res, int status, const std::string& body);
void SendError(httplib::Response& res, const Status& status);
// The model version in the URL (`/versions/<v>`): -1 when absent.
Result<std::int64_t> ParseVersion(const httplib::Request& req, std::size_t match_index);

}  // namespace inflight::server::http
