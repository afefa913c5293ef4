// The KServe v2 HTTP/REST frontend of inflight-server (health, metadata, config, stats, repository
// index, infer) plus Triton's generate extension (/generate, /generate_stream as Server-Sent
// Events), and the Prometheus /metrics endpoint on its own port. Both run on HttpServer
// (http_server.h): a fixed pool of io threads, no thread per connection.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"
#include "server/server_api.h"

namespace inflight::server::http {

class HttpServer;
class HttpHandlers;
class HttpRouter;

struct HttpServiceOptions {
  std::string address = "0.0.0.0";  // --http-address
  int port = 8000;                  // --http-port; 0 binds any free port (see HttpService::port())
  // --http-thread-count: the io threads that serve every connection. Connections do not hold a
  // thread, so this does not bound the number of clients or streams.
  int thread_count = 8;
  std::size_t max_input_bytes = 64u << 20;  // --http-max-input-size; larger bodies get 413
  // --http-read-timeout-secs: a request's head, then its body, must each arrive within this (408).
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};
  bool busy_poll = false;  // --http-busy-poll (HttpServerOptions::busy_poll)
};

// HTTP status for a Status code: kInvalidArgument, kUnsupported and kCancelled 400, kNotFound 404,
// kUnavailable 503, kAlreadyExists 409, everything else 500.
int HttpStatusFor(StatusCode code);

class HttpService {
 public:
  // `server` must outlive the service.
  HttpService(Server& server, HttpServiceOptions options);
  ~HttpService();
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  // For routes of other front ends on this port (the OpenAI routes): add them before Start().
  HttpRouter& router() { return *router_; }

  Status Start();
  int port() const;  // the bound port, after Start()
  // Graceful stop, first half: new connections are refused, /v2/health/ready answers 400, idle
  // connections close; requests in flight go on and are answered.
  void Drain();
  // Waits (up to `grace`) for answers still being written, then closes every connection, cancelling
  // the requests they wait for, and joins the io threads.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

 private:
  HttpServiceOptions options_;
  std::unique_ptr<HttpRouter> router_;
  std::unique_ptr<HttpHandlers> handlers_;
  std::unique_ptr<HttpServer> http_;
};

// GET /metrics: Server::MetricsText() as Prometheus text (version 0.0.4).
class MetricsService {
 public:
  MetricsService(const Server& server, std::string address, int port);
  ~MetricsService();
  MetricsService(const MetricsService&) = delete;
  MetricsService& operator=(const MetricsService&) = delete;

  Status Start();
  int port() const;
  void Stop();

 private:
  const Server& server_;
  std::unique_ptr<HttpRouter> router_;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace inflight::server::http
