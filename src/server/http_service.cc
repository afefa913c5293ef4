#include "server/http_service.h"

#include <utility>

#include "server/http_handlers.h"
#include "server/http_listener.h"

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
      handlers_(std::make_unique<HttpHandlers>(server)),
      listener_(std::make_unique<HttpListener>(options_.thread_count)) {
  handlers_->Register(listener_->server(), options_.max_input_bytes);
}

HttpService::~HttpService() {
  Stop();
}

Status HttpService::Start() {
  return listener_->Start(options_.address, options_.port);
}

int HttpService::port() const {
  return listener_->port();
}

void HttpService::Stop() {
  handlers_->BeginStop();
  listener_->Stop();
}

MetricsService::MetricsService(const Server& server, std::string address, int port)
    : server_(server),
      address_(std::move(address)),
      port_(port),
      listener_(std::make_unique<HttpListener>(4)) {
  listener_->server().Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(server_.MetricsText(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

MetricsService::~MetricsService() {
  Stop();
}

Status MetricsService::Start() {
  return listener_->Start(address_, port_);
}

int MetricsService::port() const {
  return listener_->port();
}

void MetricsService::Stop() {
  listener_->Stop();
}

}  // namespace inflight::server::http
