// One cpp-httplib server serving on its own thread: bind (port 0 picks a free port), serve, stop.
#pragma once

#include <string>
#include <thread>

#include <httplib.h>

#include "common/status.h"

namespace inflight::server::http {

// httplib::Server whose listening socket is reachable, to widen its accept backlog.
class ListeningServer : public httplib::Server {
 public:
  socket_t listening_socket() const { return svr_sock_; }
};

class HttpListener {
 public:
  // `thread_count` workers serve connections; each open connection (a keep-alive one or an SSE
  // stream) holds one worker while it lasts.
  explicit HttpListener(int thread_count);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  httplib::Server& server() { return server_; }

  // Binds address:port and starts serving; kUnavailable when the address cannot be bound.
  Status Start(const std::string& address, int port);
  int port() const { return port_; }
  // Stops accepting, waits for the workers to finish their current requests. Idempotent.
  void Stop();

 private:
  ListeningServer server_;
  std::thread thread_;
  int port_ = -1;
};

}  // namespace inflight::server::http
