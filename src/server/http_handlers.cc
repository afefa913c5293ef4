#include "server/http_handlers.h"

#include <charconv>

#include "server/http_infer_json.h"
#include "server/http_service.h"
#include "server/http_tensor_json.h"

#ifndef INFLIGHT_VERSION_STRING
#define INFLIGHT_VERSION_STRING "0.1.0"
#endif

namespace inflight::server::http {
namespace {

using nlohmann::json;

// <model> and the optional /versions/<v> of every per-model URL: matches[1] and matches[2].
constexpr const char* kModelPath = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";

std::string ModelRoute(const char* suffix) {
  return std::string(kModelPath) + suffix;
}

// What GET /v2 reports; only what this frontend really serves.
const std::vector<std::string>& Extensions() {
  static const std::vector<std::string> kExtensions = {"model_repository", "model_configuration",
                                                       "statistics", "parameters", "generate"};
  return kExtensions;
}

}  // namespace

void SendJson(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void SendError(httplib::Response& res, const Status& status) {
  SendJson(res, HttpStatusFor(status.code()), DumpJson(json{{"error", status.message()}}));
}

Result<std::int64_t> ParseVersion(const httplib::Request& req, std::size_t match_index) {
  if (req.matches.size() <= match_index || !req.matches[match_index].matched)
    return std::int64_t{-1};
  const std::string text = req.matches[match_index].str();
  std::int64_t version = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (ec != std::errc() || end != text.data() + text.size() || version < 0) {
    return InvalidArgument("model version \"" + text +
                           "\" in the URL is not a non-negative integer");
  }
  return version;
}

void HttpHandlers::Register(httplib::Server& http, std::size_t max_input_bytes) {
  http.set_payload_max_length(max_input_bytes);
  // httplib answers some errors itself (404 no route, 413 too large, 400 unparsable request line)
  // with an empty body; give those the same {"error": ...} shape as ours.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [max_input_bytes](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message;
        if (res.status == 404) {
          message = "no endpoint " + req.method + " " + req.path;
        } else if (res.status == 413) {
          message = "request body is larger than the limit of " + std::to_string(max_input_bytes) +
                    " bytes (--http-max-input-size)";
        } else {
          message = "HTTP error " + std::to_string(res.status);
        }
        res.set_content(DumpJson(json{{"error", message}}), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, const std::exception_ptr& ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendError(res, Internal("internal error while handling the request: " + what));
      });

  http.Get("/v2/health/live", [this](const httplib::Request&, httplib::Response& res) {
    res.status = server_.IsLive() ? 200 : 400;
  });
  http.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    res.status = (!stopping_ && server_.IsReady()) ? 200 : 400;
  });
  http.Get(R"(/v2/?)",
           [this](const httplib::Request&, httplib::Response& res) { HandleServerMetadata(res); });
  http.Post("/v2/repository/index", [this](const httplib::Request& req, httplib::Response& res) {
    HandleRepositoryIndex(req, res);
  });
  // Before the per-model routes, which would read "stats" as a model name.
  http.Get("/v2/models/stats", [this](const httplib::Request& req, httplib::Response& res) {
    HandleModelStats(req, res);
  });
  http.Get(ModelRoute("/ready"), [this](const httplib::Request& req, httplib::Response& res) {
    HandleModelReady(req, res);
  });
  http.Get(ModelRoute("/config"), [this](const httplib::Request& req, httplib::Response& res) {
    HandleModelConfig(req, res);
  });
  http.Get(ModelRoute("/stats"), [this](const httplib::Request& req, httplib::Response& res) {
    HandleModelStats(req, res);
  });
  http.Get(ModelRoute(""), [this](const httplib::Request& req, httplib::Response& res) {
    HandleModelMetadata(req, res);
  });
  http.Post(ModelRoute("/infer"),
            [this](const httplib::Request& req, httplib::Response& res) { HandleInfer(req, res); });
  http.Post(ModelRoute("/generate"), [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(req, res);
  });
  http.Post(ModelRoute("/generate_stream"),
            [this](const httplib::Request& req, httplib::Response& res) {
              HandleGenerateStream(req, res);
            });
}

void HttpHandlers::HandleServerMetadata(httplib::Response& res) {
  json body = {
      {"name", "inflight"}, {"version", INFLIGHT_VERSION_STRING}, {"extensions", Extensions()}};
  SendJson(res, 200, DumpJson(body));
}

void HttpHandlers::HandleModelMetadata(const httplib::Request& req, httplib::Response& res) {
  auto version = ParseVersion(req, 2);
  if (!version.ok()) return SendError(res, version.status());
  auto metadata = server_.GetModelMetadata(req.matches[1].str(), *version);
  if (!metadata.ok()) return SendError(res, metadata.status());
  SendJson(res, 200, DumpJson(ModelMetadataToJson(*metadata)));
}

void HttpHandlers::HandleModelReady(const httplib::Request& req, httplib::Response& res) {
  auto version = ParseVersion(req, 2);
  if (!version.ok()) return SendError(res, version.status());
  const std::string name = req.matches[1].str();
  if (server_.ModelIsReady(name, *version)) {
    res.status = 200;
    return;
  }
  // As tritonserver: a known model that is not ready is 400 with no body; a model the repository
  // does not hold at all is 404.
  for (const ModelIndexEntry& entry : server_.ModelIndex()) {
    if (entry.name == name) {
      res.status = 400;
      return;
    }
  }
  SendError(res, NotFound("unknown model: \"" + name + "\""));
}

void HttpHandlers::HandleModelConfig(const httplib::Request& req, httplib::Response& res) {
  auto version = ParseVersion(req, 2);
  if (!version.ok()) return SendError(res, version.status());
  auto config = server_.GetModelConfigJson(req.matches[1].str(), *version);
  if (!config.ok()) return SendError(res, config.status());
  SendJson(res, 200, *config);
}

void HttpHandlers::HandleModelStats(const httplib::Request& req, httplib::Response& res) {
  // NOTE: the Server API keeps statistics per model, not per version; the URL's version is only
  // checked.
  const std::string name = req.matches.size() > 1 ? req.matches[1].str() : std::string();
  if (req.matches.size() > 2) {
    auto version = ParseVersion(req, 2);
    if (!version.ok()) return SendError(res, version.status());
  }
  auto stats = server_.ModelStatisticsJson(name);
  if (!stats.ok()) return SendError(res, stats.status());
  SendJson(res, 200, *stats);
}

void HttpHandlers::HandleRepositoryIndex(const httplib::Request& req, httplib::Response& res) {
  bool ready_only = false;
  if (!req.body.empty()) {
    auto body = ParseJsonBody(req.body);
    if (!body.ok()) return SendError(res, body.status());
    if (!body->is_object())
      return SendError(res, InvalidArgument("repository index body must be a JSON object"));
    if (auto ready = body->find("ready"); ready != body->end()) {
      if (!ready->is_boolean())
        return SendError(res, InvalidArgument("'ready' must be true or false"));
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
  SendJson(res, 200, DumpJson(index));
}

}  // namespace inflight::server::http
