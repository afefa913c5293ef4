// OpenAI-compatible routes on inflight-server's HTTP port:
//   GET  /v1/models, GET /v1/models/<model>
//   POST /v1/completions, POST /v1/chat/completions (JSON, or SSE with "stream": true)
// A model name is a repository model with the ensemble's interface (openai_models.h); requests run
// through that model as /v2/models/<model>/generate would run them (openai_generation.h).
#pragma once

#include <cstdint>
#include <memory>

#include "server/http/http_message.h"
#include "server/openai/openai_models.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_stream.h"
#include "server/server_api.h"

namespace inflight::server::http {
class HttpExchange;
class HttpRouter;
}  // namespace inflight::server::http

namespace inflight::server::openai {

class OpenAiRoutes {
 public:
  // `server` must outlive the routes, and the routes the HTTP service they are registered with.
  explicit OpenAiRoutes(Server& server);

  void Register(http::HttpRouter& router);

 private:
  http::HttpReply HandleListModels();
  http::HttpReply HandleGetModel(const http::HttpRequest& req);
  void HandleCompletions(const http::HttpRequest& req,
                         const std::shared_ptr<http::HttpExchange>& exchange);
  void HandleChatCompletions(const http::HttpRequest& req,
                             const std::shared_ptr<http::HttpExchange>& exchange);

  // Counts the prompt's tokens, queues the ensemble request and answers through a ResponseWriter.
  void Serve(const OpenAiModel& model, const std::string& prompt,
             const GenerationSettings& settings, ApiKind kind,
             const std::shared_ptr<http::HttpExchange>& exchange);

  Server& server_;
  OpenAiModels models_;
  const std::int64_t created_;  // "created" of every model: when the server started
};

}  // namespace inflight::server::openai
