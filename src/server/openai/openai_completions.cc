// POST /v1/completions: the prompt goes to the model as it is.
#include <nlohmann/json.hpp>

#include "server/http/http_exchange.h"
#include "server/openai/openai_routes.h"

namespace inflight::server::openai {

void OpenAiRoutes::HandleCompletions(const http::HttpRequest& req,
                                     const std::shared_ptr<http::HttpExchange>& exchange) {
  const auto body = nlohmann::ordered_json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    return exchange->Reply(
        OpenAiErrorReply(InvalidField("", "the request body is not valid JSON")));
  }
  CompletionRequest request;
  if (auto error = ParseCompletionRequest(body, &request)) {
    return exchange->Reply(OpenAiErrorReply(*error));
  }
  auto model = models_.Resolve(request.model);
  if (!model.ok()) return exchange->Reply(OpenAiErrorReply(FromStatus(model.status(), "model")));
  Serve(**model, request.prompt, request.settings, ApiKind::kCompletion, exchange);
}

}  // namespace inflight::server::openai
