#include "server/http/http_service.h"

#include <utility>

#include "server/http/http_handlers.h"
#include "server/http/http_router.h"
#include "server/http/http_server.h"

namespace inflight::server::http {

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
    case StatusCode::kCancelled:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
    case StatusCode::kUnknown:
      return 500;
  }
  return 500;
}

HttpService::HttpService(Server& server, HttpServiceOptions options)
    : options_(std::move(options)),
      router_(std::make_unique<HttpRouter>()),
      handlers_(std::make_unique<HttpHandlers>(server, options_.max_input_bytes)) {
  handlers_->Register(*router_);
  HttpServerOptions http_options;
  http_options.address = options_.address;
  http_options.port = options_.port;
  http_options.num_io_threads = options_.thread_count;
  http_options.limits.max_body_bytes = options_.max_input_bytes;
  http_options.read_timeout = options_.read_timeout;
  http_options.busy_poll = options_.busy_poll;
  http_ = std::make_unique<HttpServer>(*router_, std::move(http_options));
}

HttpService::~HttpService() {
  Stop();
}

Status HttpService::Start() {
  return http_->Start();
}

int HttpService::port() const {
  return http_->port();
}

void HttpService::Drain() {
  handlers_->BeginStop();
  http_->Drain();
}

void HttpService::Stop(std::chrono::milliseconds grace) {
  Drain();
  http_->WaitIdle(std::chrono::steady_clock::now() + grace);
  http_->Stop();
}

MetricsService::MetricsService(const Server& server, std::string address, int port)
    : server_(server), router_(std::make_unique<HttpRouter>()) {
  router_->AddSync("GET", "/metrics", [this](const HttpRequest&) {
    HttpReply reply;
    reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
    reply.body = server_.MetricsText();
    return reply;
  });
  HttpServerOptions options;
  options.address = std::move(address);
  options.port = port;
  options.num_io_threads = 1;
  options.thread_name = "metrics-io";
  http_ = std::make_unique<HttpServer>(*router_, std::move(options));
}

MetricsService::~MetricsService() {
  Stop();
}

Status MetricsService::Start() {
  return http_->Start();
}

int MetricsService::port() const {
  return http_->port();
}

void MetricsService::Stop() {
  http_->Stop();
}

}  // namespace inflight::server::http
