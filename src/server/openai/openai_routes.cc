#include "server/openai/openai_routes.h"

#include <chrono>
#include <set>

#include <nlohmann/json.hpp>

#include "server/http/http_exchange.h"
#include "server/http/http_router.h"
#include "server/openai/openai_errors.h"

namespace inflight::server::openai {
namespace {

nlohmann::json ModelJson(const std::string& name, std::int64_t created) {
  return {{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "inflight"}};
}

}  // namespace

OpenAiRoutes::OpenAiRoutes(Server& server)
    : server_(server),
      models_(server),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {}

void OpenAiRoutes::Register(http::HttpRouter& router) {
  router.AddSync("GET", "/v1/models",
                 [this](const http::HttpRequest&) { return HandleListModels(); });
  router.AddSync("GET", "/v1/models/([^/]+)",
                 [this](const http::HttpRequest& req) { return HandleGetModel(req); });
  router.Add("POST", "/v1/completions",
             [this](http::HttpRequest& req, const std::shared_ptr<http::HttpExchange>& exchange) {
               HandleCompletions(req, exchange);
             });
  router.Add("POST", "/v1/chat/completions",
             [this](http::HttpRequest& req, const std::shared_ptr<http::HttpExchange>& exchange) {
               HandleChatCompletions(req, exchange);
             });
}

http::HttpReply OpenAiRoutes::HandleListModels() {
  nlohmann::json data = nlohmann::json::array();
  std::set<std::string> seen;
  for (const std::string& name : models_.List()) {
    if (seen.insert(name).second) data.push_back(ModelJson(name, created_));
  }
  return http::JsonReply(200, nlohmann::json{{"object", "list"}, {"data", data}}.dump());
}

http::HttpReply OpenAiRoutes::HandleGetModel(const http::HttpRequest& req) {
  const std::string name = req.groups.size() > 1 && req.groups[1] ? *req.groups[1] : "";
  auto model = models_.Resolve(name);
  if (!model.ok()) return OpenAiErrorReply(FromStatus(model.status(), "model"));
  return http::JsonReply(200, ModelJson(name, created_).dump());
}

void OpenAiRoutes::Serve(const OpenAiModel& model, const std::string& prompt,
                         const GenerationSettings& settings, ApiKind kind,
                         const std::shared_ptr<http::HttpExchange>& exchange) {
  auto ids = model.tokenizer->Encode(prompt, model.add_special_tokens);
  if (!ids.ok()) {
    return exchange->Reply(
        OpenAiErrorReply(FromStatus(ids.status(), kind == ApiKind::kChat ? "messages" : "prompt")));
  }
  const auto prompt_tokens = static_cast<std::int64_t>(ids->size());
  const std::int64_t max_tokens =
      settings.max_tokens.value_or(DefaultMaxTokens(model, kind == ApiKind::kChat, prompt_tokens));
  // The ensemble streams (a response per step) whenever per-token log-probs are asked for, and
  // when there are stop strings: the engine matches stop words as token sequences, which a stop
  // string need not align with, so the text match here may be what ends the request, and it can
  // only cancel a request that is still running. A client that does not stream still gets one body.
  const bool ensemble_streams = settings.stream || settings.logprobs || !settings.stop.empty();
  InferRequest request =
      BuildEnsembleRequest(model, prompt, settings, max_tokens, ensemble_streams);
  ResponseOptions options;
  options.kind = kind;
  options.model = model.name;
  options.stream = settings.stream;
  options.include_usage = settings.include_usage;
  options.logprobs = settings.logprobs;
  options.prompt_tokens = prompt_tokens;
  auto writer = MakeResponseWriter(std::move(options), exchange);
  if (auto refused =
          RunGeneration(server_, std::move(request), max_tokens, settings.stop, exchange, writer)) {
    return exchange->Reply(OpenAiErrorReply(*refused));
  }
  // NOTE: on the connection's strand, so the head is on the wire before any response the core may
  // already have delivered (those wait in the strand's queue behind this handler).
  writer->Begin();
}

}  // namespace inflight::server::openai
