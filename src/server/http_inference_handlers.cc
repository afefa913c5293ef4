// POST .../infer, .../generate and .../generate_stream.
#include <chrono>
#include <memory>
#include <utility>

#include "common/logging.h"
#include "server/http_generate_json.h"
#include "server/http_handlers.h"
#include "server/http_infer_json.h"
#include "server/http_response_channel.h"
#include "server/http_tensor_json.h"

namespace inflight::server::http {
namespace {

using nlohmann::json;

// How often a waiting worker looks at the stop flag.
constexpr std::chrono::milliseconds kPollInterval{100};

// Texts as tritonserver's HTTP frontend words them, so clients that match on them keep working.
constexpr const char* kDecoupledInferMessage =
    "HTTP end point doesn't support models with decoupled transaction policy";
constexpr const char* kGenerateOneResponseMessage =
    "generate expects model to produce exactly 1 response, use generate stream for model that "
    "generates "
    "various number of responses";

// Whether the model batches (max_batch_size > 0): /generate adds the batch dim.
Result<bool> ModelBatches(const Server& server, const std::string& name, std::int64_t version) {
  // NOTE: serializing the whole config to JSON to read this took ~1.2 ms a request (2-core dev VM),
  // the largest part of what the server added to a request.
  ASSIGN_OR_RETURN(std::int64_t max_batch_size, server.ModelMaxBatchSize(name, version));
  return max_batch_size > 0;
}

std::string SseEvent(const json& payload) {
  return "data: " + DumpJson(payload) + "\n\n";
}

}  // namespace

Result<std::vector<InferResponse>> HttpHandlers::RunToEnd(InferRequest request,
                                                          std::size_t max_responses,
                                                          const std::string& too_many_message) {
  auto channel = std::make_shared<ResponseChannel>();
  ASSIGN_OR_RETURN(std::shared_ptr<InflightRequest> handle,
                   server_.Infer(std::move(request), FeedChannel(channel)));
  std::vector<InferResponse> responses;
  while (true) {
    if (stopping_) {
      handle->Cancel();
      return Unavailable("the server is shutting down");
    }
    std::optional<InferResponse> response = channel->Pop(kPollInterval);
    if (!response) continue;
    const bool last = IsLast(*response);
    if (!IsFlagOnly(*response)) responses.push_back(std::move(*response));
    if (responses.size() > max_responses) {
      if (!last) handle->Cancel();
      return InvalidArgument(too_many_message);
    }
    if (last) return responses;
  }
}

void HttpHandlers::HandleInfer(const httplib::Request& req, httplib::Response& res) {
  auto version = ParseVersion(req, 2);
  if (!version.ok()) return SendError(res, version.status());
  const std::string model = req.matches[1].str();
  auto decoupled = server_.ModelIsDecoupled(model, *version);
  if (!decoupled.ok()) return SendError(res, decoupled.status());
  if (*decoupled) return SendError(res, Unsupported(kDecoupledInferMessage));

  auto body = ParseJsonBody(req.body);
  if (!body.ok()) return SendError(res, body.status());
  auto request = ParseInferRequest(*body, model, *version);
  if (!request.ok()) return SendError(res, request.status());

  auto responses =
      RunToEnd(std::move(*request), 1, "model \"" + model + "\" sent more than one response");
  if (!responses.ok()) return SendError(res, responses.status());
  if (responses->empty())
    return SendError(res, Internal("model \"" + model + "\" sent no response"));
  const InferResponse& response = responses->back();
  if (response.error) return SendError(res, *response.error);
  auto out = InferResponseToJson(response);
  if (!out.ok()) return SendError(res, out.status());
  SendJson(res, 200, DumpJson(*out));
}

Result<InferRequest> HttpHandlers::ParseGenerateBody(const httplib::Request& req) {
  ASSIGN_OR_RETURN(std::int64_t version, ParseVersion(req, 2));
  const std::string model = req.matches[1].str();
  ASSIGN_OR_RETURN(ModelMetadata metadata, server_.GetModelMetadata(model, version));
  ASSIGN_OR_RETURN(bool batching, ModelBatches(server_, model, version));
  ASSIGN_OR_RETURN(json body, ParseJsonBody(req.body));
  return ParseGenerateRequest(body, metadata, batching, version);
}

void HttpHandlers::HandleGenerate(const httplib::Request& req, httplib::Response& res) {
  auto request = ParseGenerateBody(req);
  if (!request.ok()) return SendError(res, request.status());
  const std::string model = request->model_name;
  // Like tritonserver: a decoupled model is fine here as long as it answers with exactly one
  // response.
  auto responses = RunToEnd(std::move(*request), 1, kGenerateOneResponseMessage);
  if (!responses.ok()) return SendError(res, responses.status());
  if (responses->empty()) return SendError(res, InvalidArgument(kGenerateOneResponseMessage));
  const InferResponse& response = responses->back();
  if (response.error) return SendError(res, *response.error);
  auto out = GenerateResponseToJson(response);
  if (!out.ok()) return SendError(res, out.status());
  SendJson(res, 200, DumpJson(*out));
}

void HttpHandlers::HandleGenerateStream(const httplib::Request& req, httplib::Response& res) {
  auto request = ParseGenerateBody(req);
  if (!request.ok()) return SendError(res, request.status());
  // Errors found before inference starts are a plain JSON error with its HTTP status (Triton's
  // generate extension); errors after that are an SSE event, since the 200 is already on the wire.
  auto channel = std::make_shared<ResponseChannel>();
  auto started = server_.Infer(std::move(*request), FeedChannel(channel));
  if (!started.ok()) return SendError(res, started.status());
  std::shared_ptr<InflightRequest> handle = std::move(*started);
  auto finished = std::make_shared<bool>(false);

  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream; charset=utf-8",
      [this, channel, handle, finished](std::size_t /*offset*/, httplib::DataSink& sink) {
        while (true) {
          if (stopping_) return false;
          std::optional<InferResponse> response = channel->Pop(kPollInterval);
          if (!response) continue;
          bool last = IsLast(*response);
          std::string event;
          if (response->error) {
            event = SseEvent(json{{"error", response->error->message()}});
          } else if (!IsFlagOnly(*response)) {
            auto payload = GenerateResponseToJson(*response);
            if (payload.ok()) {
              event = SseEvent(*payload);
            } else {
              event = SseEvent(json{{"error", payload.status().message()}});
              last = true;
            }
          }
          // A failed write means the client went away; the releaser below cancels the request.
          if (!event.empty() && !sink.write(event.data(), event.size())) return false;
          if (last) {
            *finished = IsLast(*response);
            sink.done();
            return true;
          }
        }
      },
      [handle, finished](bool success) {
        // Runs when the response is over, whatever ended it: a client that disconnected, a server
        // that stops, a conversion error. The backend must learn that nobody reads the rest.
        if (!success || !*finished) {
          LOG_DEBUG("generate_stream ended before the request did; cancelling it");
          handle->Cancel();
        }
      });
}

}  // namespace inflight::server::http
