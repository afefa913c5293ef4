// POST .../infer, .../generate and .../generate_stream. Each queues its request with the core and
// returns; the core's responses come back on its threads and go to the client through the
// HttpExchange. A client that leaves cancels its request (HttpExchange::OnClientGone).
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "common/logging.h"
#include "server/http/http_binary_tensors.h"
#include "server/http/http_content_coding.h"
#include "server/http/http_exchange.h"
#include "server/http/http_generate_json.h"
#include "server/http/http_handlers.h"
#include "server/http/http_infer_json.h"
#include "server/http/http_service.h"
#include "server/http/http_tensor_json.h"
#include "server/http/http_wire.h"

namespace inflight::server::http {
namespace {

using nlohmann::json;

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

// A response that only carries the FINAL flag (a decoupled model's closing
// TRITONBACKEND_ResponseFactorySendFlags): it ends the request but is not a response the client
// sees.
bool IsFlagOnly(const InferResponse& response) {
  return response.is_final && !response.error && response.outputs.empty();
}

bool IsLast(const InferResponse& response) {
  return response.is_final || response.error.has_value();
}

std::string SseEvent(const json& payload) {
  return "data: " + DumpJson(payload) + "\n\n";
}

// The core's handle of a request, which may be wanted (to cancel) before Infer() has returned it:
// a cancel asked for early is done when the handle arrives.
class CancelHandle {
 public:
  void Set(std::shared_ptr<InflightRequest> handle) {
    bool cancel_now = false;
    {
      std::lock_guard lock(mu_);
      handle_ = std::move(handle);
      cancel_now = cancel_wanted_;
    }
    if (cancel_now) handle_->Cancel();
  }
  // Idempotent: the core sees one cancellation however many reasons there are.
  void Cancel() {
    std::shared_ptr<InflightRequest> handle;
    {
      std::lock_guard lock(mu_);
      if (cancel_wanted_) return;
      cancel_wanted_ = true;
      handle = handle_;
    }
    if (handle) handle->Cancel();
  }

 private:
  std::mutex mu_;
  std::shared_ptr<InflightRequest> handle_;
  bool cancel_wanted_ = false;
};

// Turns the one response of a request into its HTTP answer (on an io thread).
using ToReply = std::function<Result<HttpReply>(const InferResponse&)>;

// A request answered by one HTTP response: collects the core's responses (a decoupled model may
// send one, then a flag-only FINAL) and answers when the last one comes. More than one response
// that carries something cancels the request and answers `too_many_message`.
class OneAnswer {
 public:
  OneAnswer(std::shared_ptr<HttpExchange> exchange, ToReply to_reply, std::string too_many_message,
            std::string none_message)
      : exchange_(std::move(exchange)),
        to_reply_(std::move(to_reply)),
        too_many_message_(std::move(too_many_message)),
        none_message_(std::move(none_message)) {}

  // On a core thread.
  void OnResponse(InferResponse response) {
    std::lock_guard lock(mu_);
    if (done_) return;
    const bool last = IsLast(response);
    if (!IsFlagOnly(response)) responses_.push_back(std::move(response));
    if (responses_.size() > 1) {
      done_ = true;
      if (!last) cancel_.Cancel();
      exchange_->Reply(ErrorReply(InvalidArgument(too_many_message_)));
      return;
    }
    if (!last) return;
    done_ = true;
    if (responses_.empty()) {
      exchange_->Reply(ErrorReply(InvalidArgument(none_message_)));
      return;
    }
    // JSON is written on the io thread, not on the core thread that delivers responses.
    exchange_->Dispatch([exchange = exchange_, to_reply = to_reply_,
                         response = std::make_shared<InferResponse>(std::move(responses_[0]))] {
      if (response->error) return exchange->Reply(ErrorReply(*response->error));
      auto out = to_reply(*response);
      if (!out.ok()) return exchange->Reply(ErrorReply(out.status()));
      exchange->Reply(std::move(*out));
    });
  }

  CancelHandle& cancel() { return cancel_; }

 private:
  std::shared_ptr<HttpExchange> exchange_;
  ToReply to_reply_;
  std::string too_many_message_;
  std::string none_message_;
  CancelHandle cancel_;
  std::mutex mu_;
  bool done_ = false;
  std::vector<InferResponse> responses_;
};

// Queues `request`, answering through `exchange` as one response; a client that leaves cancels it.
void RunOneAnswer(Server& server, InferRequest request,
                  const std::shared_ptr<HttpExchange>& exchange, ToReply to_reply,
                  std::string too_many_message, std::string none_message) {
  auto answer = std::make_shared<OneAnswer>(exchange, std::move(to_reply),
                                            std::move(too_many_message), std::move(none_message));
  auto started = server.Infer(std::move(request), [answer](InferResponse response) {
    answer->OnResponse(std::move(response));
  });
  if (!started.ok()) return exchange->Reply(ErrorReply(started.status()));
  answer->cancel().Set(std::move(*started));
  exchange->OnClientGone([answer] {
    LOG_DEBUG("HTTP client left before its answer; cancelling the request");
    answer->cancel().Cancel();
  });
}

Result<HttpReply> GenerateToReply(const InferResponse& response) {
  ASSIGN_OR_RETURN(json out, GenerateResponseToJson(response));
  return JsonReply(200, DumpJson(out));
}

// The JSON inference header, or, when it fails to parse and the request gave no
// Inference-Header-Content-Length, the same error with a word on why binary data may be the cause.
Result<json> ParseInferHeader(const InferBody& parts) {
  auto body = ParseJsonBody(parts.json);
  if (body.ok() || parts.has_header_length ||
      parts.json.find("binary_data_size") == std::string_view::npos) {
    return body;
  }
  return InvalidArgument(body.status().message() +
                         "; a body that carries binary tensor data (binary_data_size) needs the " +
                         std::string(kInferHeaderContentLength) +
                         " header giving the length of its JSON part");
}

}  // namespace

void HttpHandlers::HandleInfer(const HttpRequest& req,
                               const std::shared_ptr<HttpExchange>& exchange) {
  auto version = ParseVersion(req, 2);
  if (!version.ok()) return exchange->Reply(ErrorReply(version.status()));
  const std::string& model = ModelName(req);
  auto decoupled = server_.ModelIsDecoupled(model, *version);
  if (!decoupled.ok()) return exchange->Reply(ErrorReply(decoupled.status()));
  if (*decoupled) return exchange->Reply(ErrorReply(Unsupported(kDecoupledInferMessage)));

  DecodedBody decoded(req);
  if (auto refused = decoded.Decode(max_input_bytes_)) return exchange->Reply(std::move(*refused));
  // Inference-Header-Content-Length counts bytes of the inflated body, as in Triton's
  // GetContentLength when the body was compressed.
  auto parts = SplitInferBody(decoded.body(), HeaderValues(req, kInferHeaderContentLength));
  if (!parts.ok()) return exchange->Reply(ErrorReply(parts.status()));
  auto body = ParseInferHeader(*parts);
  if (!body.ok()) return exchange->Reply(ErrorReply(body.status()));
  auto parsed = ParseInferRequest(*body, *parts, model, *version);
  if (!parsed.ok()) return exchange->Reply(ErrorReply(parsed.status()));
  auto to_reply =
      [binary_outputs = std::move(parsed->binary_outputs),
       coding = ChooseResponseCoding(req)](const InferResponse& response) -> Result<HttpReply> {
    std::string binary;
    ASSIGN_OR_RETURN(json header, InferResponseToJson(response, binary_outputs, binary));
    HttpReply reply = InferReply(DumpJson(header), binary);
    EncodeReply(reply, coding);
    return reply;
  };
  RunOneAnswer(server_, std::move(parsed->request), exchange, std::move(to_reply),
               "model \"" + model + "\" sent more than one response",
               "model \"" + model + "\" sent no response");
}

Result<InferRequest> HttpHandlers::ParseGenerateBody(const HttpRequest& req) {
  ASSIGN_OR_RETURN(std::int64_t version, ParseVersion(req, 2));
  const std::string& model = ModelName(req);
  ASSIGN_OR_RETURN(ModelMetadata metadata, server_.GetModelMetadata(model, version));
  ASSIGN_OR_RETURN(bool batching, ModelBatches(server_, model, version));
  ASSIGN_OR_RETURN(json body, ParseJsonBody(req.body));
  return ParseGenerateRequest(body, metadata, batching, version);
}

void HttpHandlers::HandleGenerate(const HttpRequest& req,
                                  const std::shared_ptr<HttpExchange>& exchange) {
  // Triton's HandleGenerate also refuses any Content-Encoding but identity.
  if (auto refused = CheckContentEncoding(req)) return exchange->Reply(std::move(*refused));
  auto request = ParseGenerateBody(req);
  if (!request.ok()) return exchange->Reply(ErrorReply(request.status()));
  // Like tritonserver: a decoupled model is fine here as long as it answers with exactly one
  // response.
  RunOneAnswer(server_, std::move(*request), exchange, GenerateToReply, kGenerateOneResponseMessage,
               kGenerateOneResponseMessage);
}

void HttpHandlers::HandleGenerateStream(const HttpRequest& req,
                                        const std::shared_ptr<HttpExchange>& exchange) {
  if (auto refused = CheckContentEncoding(req)) return exchange->Reply(std::move(*refused));
  auto request = ParseGenerateBody(req);
  if (!request.ok()) return exchange->Reply(ErrorReply(request.status()));
  // Errors found before inference starts are a plain JSON error with its HTTP status (Triton's
  // generate extension); errors after that are an SSE event, since the 200 is already on the wire.
  auto cancel = std::make_shared<CancelHandle>();
  auto on_response = [exchange, cancel](InferResponse response) {
    exchange->Dispatch(
        [exchange, cancel, response = std::make_shared<InferResponse>(std::move(response))] {
          bool last = IsLast(*response);
          if (response->error) {
            exchange->Send(SseEvent(json{{"error", response->error->message()}}));
          } else if (!IsFlagOnly(*response)) {
            auto payload = GenerateResponseToJson(*response);
            if (payload.ok()) {
              exchange->Send(SseEvent(*payload));
            } else {
              exchange->Send(SseEvent(json{{"error", payload.status().message()}}));
              if (!last) cancel->Cancel();  // nobody will read the rest
              last = true;
            }
          }
          if (last) exchange->End();
        });
  };
  HttpReply head;
  head.content_type = "text/event-stream; charset=utf-8";
  head.headers.emplace_back("Cache-Control", "no-cache");
  auto result = server_.Infer(std::move(*request), std::move(on_response));
  if (!result.ok()) return exchange->Reply(ErrorReply(result.status()));
  // NOTE: the head goes out only once the core took the request, so that a refusal (a full queue)
  // is still a plain error. It is still first on the wire: this handler runs on the connection's
  // strand, so StartStream writes inline while the responses the core may already have delivered
  // wait in the strand's queue behind it.
  exchange->StartStream(std::move(head));
  cancel->Set(std::move(*result));
  exchange->OnClientGone([cancel] {
    LOG_DEBUG("generate_stream client left; cancelling the request");
    cancel->Cancel();
  });
}

}  // namespace inflight::server::http
