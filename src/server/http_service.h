// The KServe v2 HTTP/REST frontend of inflight-server (health, metadata, config, stats, repository
// index, infer) plus Triton's generate extension (/generate, /generate_stream as Server-Sent
// Events), and the Prometheus /metrics endpoint on its own port.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"
#include "server/server_api.h"

namespace inflight::server::http {

class HttpListener;
class HttpHandlers;

struct HttpServiceOptions {
  std::string address = "0.0.0.0";  // --http-address
  int port = 8000;                  // --http-port; 0 binds any free port (see HttpService::port())
  // --http-thread-count. Every open connection holds a worker, an SSE stream for its whole life, so
  // this bounds the number of concurrent streaming clients.
  int thread_count = 128;
  std::size_t max_input_bytes = 64u << 20;  // --http-max-input-size; larger bodies get 413
};

// HTTP status for a Status code: kInvalidArgument and kUnsupported 400, kNotFound 404, kUnavailable
// 503, kAlreadyExists 409, everything else 500.
int HttpStatusFor(StatusCode code);

class HttpService {
 public:
  // `server` must outlive the service.
  HttpService(Server& server, HttpServiceOptions options);
  ~HttpService();
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  Status Start();
  int port() const;  // the bound port, after Start()
  // Ends open streams (cancelling their requests), stops accepting and joins the workers.
  void Stop();

 private:
  HttpServiceOptions options_;
  std::unique_ptr<HttpHandlers> handlers_;
  std::unique_ptr<HttpListener> listener_;
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
  std::string address_;
  int port_;
  std::unique_ptr<HttpListener> listener_;
};

}  // namespace inflight::server::http
