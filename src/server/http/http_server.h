// An event-driven HTTP/1.1 server on Boost.Beast and Asio: a fixed pool of io threads, each running
// its own io_context, serves every connection (each connection stays on one thread); nothing waits
// on a thread per connection.
//
// Why Beast: cpp-httplib, before it, held one worker thread per open connection, so 130 idle or
// streaming clients starved health probes (bench/results/*-cpu-http-layer.md has the before/after
// figures). Of the event-driven libraries in Debian, libevent's evhttp (what tritonserver uses)
// hands a request over only whole and closes on its own terms, with no hook for the RFC 9112
// checks below or for noticing a client that leaves while its answer is computed. Beast is
// header-only (libboost-dev), reports the parser's limits and errors to us (413, 431, conflicting
// Content-Length), and lets a connection keep reading while its request runs, which is how a
// disconnect cancels a non-streamed request. A streamed token costs a strand post and a gathered
// write. (libevent was weighed on these grounds, not benchmarked.)
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "server/http/http_router.h"
#include "server/http/http_wire.h"

namespace inflight::server::http {

struct HttpServerOptions {
  std::string address = "0.0.0.0";
  int port = 8000;  // 0: any free port (see port())
  int num_io_threads = 8;
  std::string thread_name = "http-io";  // what top and /proc show for the io threads (<= 15 chars)
  HttpLimits limits;
  // A request's head, and then its body, must each arrive within this; else 408.
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};
  // A keep-alive connection with no request started is closed after this.
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(300)};
  // An io thread whose connections have a request in flight, or that ran a handler within the last
  // few milliseconds, polls its sockets instead of sleeping: an answer posted by a model's thread,
  // and a keep-alive client's next request, then need no wake-up (20-70 us each on a virtual
  // machine). A core for each such thread.
  bool busy_poll = false;
};

class HttpServer {
 public:
  // `router` must outlive the server.
  HttpServer(const HttpRouter& router, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts the io threads; kUnavailable when the address cannot be bound.
  Status Start();
  int port() const;
  // Stops accepting (new connections are refused), closes idle connections; the others close once
  // their current answer is out. Idempotent.
  void Drain();
  // True when no connection is reading a request or writing an answer before `deadline`.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) const;
  // Drain, then every connection is closed at once, cancelling the requests they wait for, and the
  // io threads are joined. Idempotent.
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inflight::server::http
