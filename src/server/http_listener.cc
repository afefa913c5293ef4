#include "server/http_listener.h"

#include <sys/socket.h>

#include <chrono>

namespace inflight::server::http {
namespace {
constexpr int kAcceptBacklog = 1024;
constexpr std::size_t kKeepAliveMaxRequests = 1000;
}  // namespace

HttpListener::HttpListener(int thread_count) {
  const auto workers = static_cast<std::size_t>(thread_count > 0 ? thread_count : 1);
  server_.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  // NOTE: streamed tokens are small writes; Nagle would hold each one back for an ACK.
  server_.set_tcp_nodelay(true);
  // NOTE: cpp-httplib closes a keep-alive connection after 5 requests by default, so a client that
  // keeps its connection reconnected every fifth request (~0.2 ms on loopback, measured). A high
  // limit still rotates connections now and then, which lets connections queued behind busy
  // workers in.
  server_.set_keep_alive_max_count(kKeepAliveMaxRequests);
}

HttpListener::~HttpListener() {
  Stop();
}

Status HttpListener::Start(const std::string& address, int port) {
  if (port < 0 || port > 65535) {
    return InvalidArgument("port " + std::to_string(port) + " is not in 0..65535");
  }
  if (port == 0) {
    port_ = server_.bind_to_any_port(address);
    if (port_ < 0) return Unavailable("cannot bind " + address + " to any port");
  } else {
    if (!server_.bind_to_port(address, port)) {
      return Unavailable("cannot bind " + address + ":" + std::to_string(port) +
                         " (address in use or not local)");
    }
    port_ = port;
  }
  // NOTE: cpp-httplib 0.11 listens with a backlog of 5; a burst of clients (64 streams opening at
  // once) then overflows the accept queue and some connections stall or fail. listen() again only
  // resizes the queue.
  ::listen(server_.listening_socket(), kAcceptBacklog);
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  // stop() is a no-op until listen_after_bind() has marked the server running; wait for it so that
  // an early Stop() cannot leave the thread serving forever.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server_.is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!server_.is_running())
    return Internal("HTTP server on port " + std::to_string(port_) + " did not start");
  return Status::Ok();
}

void HttpListener::Stop() {
  if (!thread_.joinable()) return;
  server_.stop();
  thread_.join();
}

}  // namespace inflight::server::http
