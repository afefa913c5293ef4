#include "server/http/http_handlers.h"

#include <charconv>

#include "server/http/http_exchange.h"
#include "server/http/http_infer_json.h"
#include "server/http/http_router.h"
#include "server/http/http_service.h"
#include "server/http/http_tensor_json.h"

#ifndef INFLIGHT_VERSION_STRING
#define INFLIGHT_VERSION_STRING "0.1.0"
#endif

namespace inflight::server::http {
namespace {

using nlohmann::json;

// <model> and the optional /versions/<v> of every per-model URL: groups 1 and 2.
constexpr const char* kModelPath = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";

std::string ModelRoute(const char* suffix) {
  return std::string(kModelPath) + suffix;
}

// What GET /v2 reports; only what this frontend really serves.
const std::vector<std::string>& Extensions() {
  static const std::vector<std::string> kExtensions = {"model_repository", "model_configuration",
                                                       "statistics",       "parameters",
                                                       "generate",         "binary_tensor_data"};
  return kExtensions;
}

}  // namespace

HttpReply ErrorReply(const Status& status) {
  return JsonErrorReply(HttpStatusFor(status.code()), status.message());
}

const std::string& ModelName(const HttpRequest& req) {
  static const std::string kNone;
  return req.groups.size() > 1 && req.groups[1] ? *req.groups[1] : kNone;
}

Result<std::int64_t> ParseVersion(const HttpRequest& req, std::size_t index) {
  if (req.groups.size() <= index || !req.groups[index]) return std::int64_t{-1};
  const std::string& text = *req.groups[index];
  std::int64_t version = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (ec != std::errc() || end != text.data() + text.size() || version < 0) {
    return InvalidArgument("model version \"" + text +
                           "\" in the URL is not a non-negative integer");
  }
  return version;
}

void HttpHandlers::Register(HttpRouter& router) {
  auto status_only = [](int status) {
    HttpReply reply;
    reply.status = status;
    return reply;
  };
  router.AddSync("GET", "/v2/health/live", [this, status_only](const HttpRequest&) {
    return status_only(server_.IsLive() ? 200 : 400);
  });
  router.AddSync("GET", "/v2/health/ready", [this, status_only](const HttpRequest&) {
    return status_only((!stopping_ && server_.IsReady()) ? 200 : 400);
  });
  router.AddSync("GET", R"(/v2/?)", [this](const HttpRequest&) { return HandleServerMetadata(); });
  router.AddSync("POST", "/v2/repository/index",
                 [this](const HttpRequest& req) { return HandleRepositoryIndex(req); });
  // Before the per-model routes, which would read "stats" as a model name.
  router.AddSync("GET", "/v2/models/stats",
                 [this](const HttpRequest& req) { return HandleModelStats(req); });
  router.AddSync("GET", ModelRoute("/ready"),
                 [this](const HttpRequest& req) { return HandleModelReady(req); });
  router.AddSync("GET", ModelRoute("/config"),
                 [this](const HttpRequest& req) { return HandleModelConfig(req); });
  router.AddSync("GET", ModelRoute("/stats"),
                 [this](const HttpRequest& req) { return HandleModelStats(req); });
  router.AddSync("GET", ModelRoute(""),
                 [this](const HttpRequest& req) { return HandleModelMetadata(req); });
  router.Add("POST", ModelRoute("/infer"),
             [this](HttpRequest& req, const std::shared_ptr<HttpExchange>& exchange) {
               HandleInfer(req, exchange);
             });
  router.Add("POST", ModelRoute("/generate"),
             [this](HttpRequest& req, const std::shared_ptr<HttpExchange>& exchange) {
               HandleGenerate(req, exchange);
             });
  router.Add("POST", ModelRoute("/generate_stream"),
             [this](HttpRequest& req, const std::shared_ptr<HttpExchange>& exchange) {
               HandleGenerateStream(req, exchange);
             });
}

HttpReply HttpHandlers::HandleServerMetadata() {
  json body = {
      {"name", "inflight"}, {"version", INFLIGHT_VERSION_STRING}, {"extensions", Extensions()}};
  return JsonReply(200, DumpJson(body));
}

HttpReply HttpHandlers::HandleModelMetadata(const HttpRequest& req) {
  auto version = ParseVersion(req, 2);
  if (!version.ok()) return ErrorReply(version.status());
  auto metadata = server_.GetModelMetadata(ModelName(req), *version);
  if (!metadata.ok()) return ErrorReply(metadata.status());
  return JsonReply(200, DumpJson(ModelMetadataToJson(*metadata)));
}

HttpReply HttpHandlers::HandleModelReady(const HttpRequest& req) {
  auto version = ParseVersion(req, 2);
  if (!version.ok()) return ErrorReply(version.status());
  const std::string name = ModelName(req);
  HttpReply bare;
  if (server_.ModelIsReady(name, *version)) return bare;
  // As tritonserver: a known model that is not ready is 400 with no body; a model the repository
  // does not hold at all is 404.
  for (const ModelIndexEntry& entry : server_.ModelIndex()) {
    if (entry.name == name) {
      bare.status = 400;
      return bare;
    }
  }
  return ErrorReply(NotFound("unknown model: \"" + name + "\""));
}

HttpReply HttpHandlers::HandleModelConfig(const HttpRequest& req) {
  auto version = ParseVersion(req, 2);
  if (!version.ok()) return ErrorReply(version.status());
  auto config = server_.GetModelConfigJson(ModelName(req), *version);
  if (!config.ok()) return ErrorReply(config.status());
  return JsonReply(200, *config);
}

HttpReply HttpHandlers::HandleModelStats(const HttpRequest& req) {
  // NOTE: the Server API keeps statistics per model, not per version; the URL's version is only
  // checked.
  const std::string name = ModelName(req);
  if (req.groups.size() > 2) {
    auto version = ParseVersion(req, 2);
    if (!version.ok()) return ErrorReply(version.status());
  }
  auto stats = server_.ModelStatisticsJson(name);
  if (!stats.ok()) return ErrorReply(stats.status());
  return JsonReply(200, *stats);
}

HttpReply HttpHandlers::HandleRepositoryIndex(const HttpRequest& req) {
  bool ready_only = false;
  if (!req.body.empty()) {
    auto body = ParseJsonBody(req.body);
    if (!body.ok()) return ErrorReply(body.status());
    if (!body->is_object())
      return ErrorReply(InvalidArgument("repository index body must be a JSON object"));
    if (auto ready = body->find("ready"); ready != body->end()) {
      if (!ready->is_boolean()) return ErrorReply(InvalidArgument("'ready' must be true or false"));
      ready_only = ready->get<bool>();
    }
  }
  json index = json::array();
  for (const ModelIndexEntry& entry : server_.ModelIndex()) {
    if (ready_only && entry.state != "READY") continue;
    json item = {{"name", entry.name}};
    if (!entry.version.empty()) item["version"] = entry.version;
    if (!entry.state.empty()) item["state"] = entry.state;
    if (!entry.reason.empty()) item["reason"] = entry.reason;
    index.push_back(std::move(item));
  }
  return JsonReply(200, DumpJson(index));
}

}  // namespace inflight::server::http
