#include "server/http/http_server.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "common/logging.h"
#include "common/spin_wait.h"
#include "server/http/http_connection.h"

namespace inflight::server::http {

namespace net = boost::asio;
using boost::system::error_code;
using tcp = net::ip::tcp;

namespace {
constexpr int kAcceptBacklog = 1024;
// After an accept error (out of file descriptors) accepting pauses this long instead of spinning.
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(50);

// One io_context a thread. With every thread on one io_context, each handler a request posts woke
// another idle io thread (Asio hands posted work to a sleeping thread): strace of one /generate
// showed dozens of futex wakes among the 8 threads, and on the device a concurrency-1 request spent
// 0.56 ms from the client's send to the executor and 0.68 ms from the last token to the client.
// A connection lives on one context, so its handlers run on its thread without waking another.
std::vector<std::unique_ptr<net::io_context>> MakeContexts(int n) {
  std::vector<std::unique_ptr<net::io_context>> contexts;
  for (int i = 0; i < std::max(1, n); ++i) contexts.push_back(std::make_unique<net::io_context>(1));
  return contexts;
}

// HttpServerOptions::busy_poll: how long an io thread with no busy connection keeps polling after
// its last handler. A keep-alive client sends its next request well within it.
constexpr auto kIoPollWindow = std::chrono::milliseconds(5);

// Runs `ioc` until it stops. With `poll`, the thread sleeps in epoll only when none of its
// connections is busy and it has been idle for kIoPollWindow.
void RunContext(net::io_context& ioc, const std::atomic<int>& busy, bool poll) {
  if (!poll) {
    ioc.run();
    return;
  }
  using Clock = std::chrono::steady_clock;
  Clock::time_point last = Clock::now();
  while (!ioc.stopped()) {
    std::size_t ran = ioc.poll();
    if (ran == 0) {
      if (busy.load(std::memory_order_relaxed) > 0 || Clock::now() - last < kIoPollWindow) {
        CpuRelax();
        continue;
      }
      ran = ioc.run_one();  // sleeps until a handler is ready
    }
    if (ran > 0) last = Clock::now();
  }
}
}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpRouter& router, HttpServerOptions options)
      : options_(std::move(options)),
        state_(std::make_shared<HttpServerState>()),
        contexts_(MakeContexts(options_.num_io_threads)),
        busy_(contexts_.size()),
        acceptor_strand_(net::make_strand(*contexts_.front())),
        acceptor_(acceptor_strand_),
        retry_timer_(acceptor_strand_) {
    for (auto& ioc : contexts_) work_.push_back(net::make_work_guard(*ioc));
    for (auto& busy : busy_) busy = std::make_shared<std::atomic<int>>(0);
    state_->router = &router;
    state_->limits = options_.limits;
    state_->timeouts.read = options_.read_timeout;
    state_->timeouts.idle = options_.idle_timeout;
  }

  ~Impl() {
    Stop();
    // From here on nothing may post to the io_context: it is about to go.
    std::lock_guard lock(state_->gate_mu);
    state_->gate_open = false;
  }

  Status Start() {
    if (options_.port < 0 || options_.port > 65535) {
      return InvalidArgument("port " + std::to_string(options_.port) + " is not in 0..65535");
    }
    error_code ec;
    const net::ip::address address = net::ip::make_address(options_.address, ec);
    if (ec) {
      return InvalidArgument("HTTP address \"" + options_.address +
                             "\" is not an IPv4 or IPv6 address: " + ec.message());
    }
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(kAcceptBacklog, ec);
    if (ec) {
      return Unavailable("cannot bind " + options_.address + ":" + std::to_string(options_.port) +
                         ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    for (std::size_t i = 0; i < contexts_.size(); ++i) {
      threads_.emplace_back([this, ioc = contexts_[i].get(), busy = busy_[i]] {
        pthread_setname_np(pthread_self(), options_.thread_name.substr(0, 15).c_str());
        MarkIoThread(state_.get());
        RunContext(*ioc, *busy, options_.busy_poll);
      });
    }
    net::post(acceptor_strand_, [this] { Accept(); });
    return Status::Ok();
  }

  int port() const { return port_; }

  void Drain() {
    if (state_->draining.exchange(true)) return;
    if (threads_.empty()) {
      error_code ignored;
      acceptor_.close(ignored);
      return;
    }
    std::promise<void> closed;
    net::post(acceptor_strand_, [this, &closed] {
      error_code ignored;
      retry_timer_.cancel();
      acceptor_.close(ignored);
      closed.set_value();
    });
    // NOTE: the listening socket is closed before Drain returns, so a client that connects after it
    // is refused rather than left in the accept queue.
    closed.get_future().wait();
    for (auto& connection : Connections()) connection->Drain();
  }

  // Connections between a request's first byte and its answer's last, over all io threads.
  int NumBusy() const {
    int n = 0;
    for (const auto& busy : busy_) n += busy->load();
    return n;
  }

  bool WaitIdle(std::chrono::steady_clock::time_point deadline) const {
    while (NumBusy() > 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    Drain();
    for (auto& connection : Connections()) connection->Abort();
    // The aborts run on the io threads: give them a moment to cancel and close, then stop.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(state_->connections_mu);
        if (state_->connections.empty()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    work_.clear();
    for (auto& ioc : contexts_) ioc->stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  std::vector<std::shared_ptr<HttpConnection>> Connections() {
    std::vector<std::shared_ptr<HttpConnection>> out;
    std::lock_guard lock(state_->connections_mu);
    for (auto& [ptr, weak] : state_->connections) {
      if (auto c = weak.lock()) out.push_back(std::move(c));
    }
    return out;
  }

  void Accept() {
    if (!acceptor_.is_open()) return;
    // Round robin over the contexts: each connection's handlers stay on one thread.
    const std::size_t context = next_context_++ % contexts_.size();
    auto strand = net::make_strand(*contexts_[context]);
    acceptor_.async_accept(strand, [this, strand, context](error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (ec) {
        // EMFILE/ENFILE: the connection stays in the backlog until a descriptor frees up.
        LOG_WARN("HTTP accept on port {} failed: {}; retrying", port_, ec.message());
        retry_timer_.expires_after(kAcceptRetryDelay);
        retry_timer_.async_wait([this](error_code wait_ec) {
          if (!wait_ec) Accept();
        });
        return;
      }
      std::make_shared<HttpConnection>(std::move(socket), strand, state_, busy_[context])->Start();
      Accept();
    });
  }

  HttpServerOptions options_;
  std::shared_ptr<HttpServerState> state_;
  std::vector<std::unique_ptr<net::io_context>> contexts_;
  // Per context (io thread): its busy connections (HttpConnection's thread_busy); their sum is
  // what WaitIdle waits for.
  std::vector<std::shared_ptr<std::atomic<int>>> busy_;
  net::strand<net::io_context::executor_type> acceptor_strand_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_timer_;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::size_t next_context_ = 0;  // the acceptor's strand only
  std::vector<std::thread> threads_;
  int port_ = -1;
  bool stopped_ = false;
};

HttpServer::HttpServer(const HttpRouter& router, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(router, std::move(options))) {}

HttpServer::~HttpServer() = default;

Status HttpServer::Start() {
  return impl_->Start();
}

int HttpServer::port() const {
  return impl_->port();
}

void HttpServer::Drain() {
  impl_->Drain();
}

bool HttpServer::WaitIdle(std::chrono::steady_clock::time_point deadline) const {
  return impl_->WaitIdle(deadline);
}

void HttpServer::Stop() {
  impl_->Stop();
}

}  // namespace inflight::server::http
