#include "server/http/http_connection.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>

#include "common/logging.h"
#include "server/http/http_exchange.h"
#include "server/http/http_request_head.h"

namespace inflight::server::http {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;

namespace {
constexpr std::size_t kReadChunk = 4096;
// NOTE: a client that sends its request and then shutdown(SHUT_WR) (netcat -N, HTTP/1.0-era
// tools) has its FIN follow the request at once; a client that gives up waiting (curl -m1, a
// closed browser tab) sends it later. A FIN within this time of the request's last byte is read
// as the first (the request is answered, then the connection closed); a later one as the second
// (the request is cancelled). TCP cannot tell the two apart otherwise: both are a plain FIN.
constexpr auto kHalfCloseGrace = std::chrono::milliseconds(200);
// While a request is handled, bytes of the next (pipelined) request are kept up to this.
constexpr std::size_t kMaxPipelinedBytes = 64u << 10;
// A connection that answered an error and closes reads (and drops) what the client still sends for
// this long, so that the client sees the answer instead of a reset (RFC 9112 9.6).
constexpr auto kLingerTime = std::chrono::seconds(2);

// Which server's io pool the current thread belongs to (null: none).
thread_local const HttpServerState* tls_io_server = nullptr;
}  // namespace

void HttpExchange::OnClientGone(std::function<void()> on_gone) {
  std::unique_lock lock(mu_);
  if (answered_) {
    lock.unlock();
    return;  // `on_gone` is destroyed here, outside the lock
  }
  if (gone_) {
    lock.unlock();
    if (on_gone) on_gone();
    return;
  }
  on_gone_ = std::move(on_gone);
}

bool HttpExchange::client_gone() const {
  std::lock_guard lock(mu_);
  return gone_;
}

void HttpExchange::NotifyAnswered() {
  std::function<void()> on_gone;
  {
    std::lock_guard lock(mu_);
    answered_ = true;
    on_gone = std::move(on_gone_);
    on_gone_ = nullptr;
  }
}

void HttpExchange::NotifyClientGone() {
  std::function<void()> on_gone;
  {
    std::lock_guard lock(mu_);
    if (gone_) return;
    gone_ = true;
    on_gone = std::move(on_gone_);
  }
  if (on_gone) on_gone();
}

class ConnectionExchange : public HttpExchange {
 public:
  ConnectionExchange(std::weak_ptr<HttpConnection> connection,
                     std::shared_ptr<HttpServerState> state)
      : connection_(std::move(connection)), state_(std::move(state)) {}

  void Reply(HttpReply reply) override {
    Run([this, reply = std::move(reply)](HttpConnection& c) { c.ExchangeReply(this, reply); });
  }
  void StartStream(HttpReply head) override {
    Run([this, head = std::move(head)](HttpConnection& c) { c.ExchangeStartStream(this, head); });
  }
  void Send(std::string data) override {
    Run([this, data = std::move(data)](HttpConnection& c) mutable {
      c.ExchangeSend(this, std::move(data));
    });
  }
  void End() override {
    Run([this](HttpConnection& c) { c.ExchangeEnd(this); });
  }
  void Dispatch(std::function<void()> fn) override {
    Run([fn = std::move(fn)](HttpConnection&) { fn(); });
  }

  void Gone() { NotifyClientGone(); }
  void Answered() { NotifyAnswered(); }

 private:
  template <class Fn>
  void Run(Fn fn) {
    // NOTE: the task keeps the exchange alive until it ran; it acts only while the exchange is the
    // connection's current one (a late response of a cancelled request is dropped).
    std::function<void()> task = [self = self_.lock(), weak = connection_,
                                  fn = std::move(fn)]() mutable {
      auto c = weak.lock();
      if (c && c->IsCurrent(static_cast<ConnectionExchange*>(self.get()))) fn(*c);
    };
    if (OnIoThreadOf(state_.get())) {
      if (auto connection = connection_.lock()) connection->Post(std::move(task));
      return;
    }
    // A core thread. The connection found here may be the last reference to it, so it is let go
    // before the gate opens again: never after the io_context it belongs to is gone.
    std::lock_guard lock(state_->gate_mu);
    if (!state_->gate_open) return;
    if (auto connection = connection_.lock()) connection->PostUnderGate(std::move(task));
  }

  std::weak_ptr<HttpConnection> connection_;
  std::shared_ptr<HttpServerState> state_;
  std::weak_ptr<ConnectionExchange> self_;
  friend class HttpConnection;
};

HttpConnection::HttpConnection(net::ip::tcp::socket socket, Strand strand,
                               std::shared_ptr<HttpServerState> state,
                               std::shared_ptr<std::atomic<int>> thread_busy)
    : state_(std::move(state)),
      thread_busy_(std::move(thread_busy)),
      strand_(std::move(strand)),
      socket_(std::move(socket)),
      timer_(strand_) {}

HttpConnection::~HttpConnection() {
  if (exchange_ && !answer_done_) exchange_->Gone();
  if (busy_) thread_busy_->fetch_sub(1);
  std::lock_guard lock(state_->connections_mu);
  state_->connections.erase(this);
}

void HttpConnection::Start() {
  {
    std::lock_guard lock(state_->connections_mu);
    state_->connections[this] = weak_from_this();
  }
  error_code ec;
  // NOTE: streamed tokens are small writes; Nagle would hold each one back for an ACK.
  socket_.set_option(net::ip::tcp::no_delay(true), ec);
  Post([this] { ReadIdle(); });
}

void MarkIoThread(const HttpServerState* state) {
  tls_io_server = state;
}

bool OnIoThreadOf(const HttpServerState* state) {
  return tls_io_server == state;
}

void HttpConnection::Post(std::function<void()> fn) {
  if (OnIoThreadOf(state_.get())) {
    // On the strand already (a handler answering at once, a Dispatch turning a response into an
    // event): run inline, saving a trip through the queue.
    if (strand_.running_in_this_thread()) return fn();
    net::post(strand_, [self = shared_from_this(), fn = std::move(fn)] { fn(); });
    return;
  }
  std::lock_guard lock(state_->gate_mu);
  if (state_->gate_open) PostUnderGate(std::move(fn));
}

void HttpConnection::PostUnderGate(std::function<void()> fn) {
  net::post(strand_, [self = shared_from_this(), fn = std::move(fn)] { fn(); });
}

void HttpConnection::Drain() {
  Post([this] {
    if (idle_) Close();
  });
}

void HttpConnection::Abort() {
  Post([this] { ClientGone(); });
}

void HttpConnection::SetBusy(bool busy) {
  if (busy == busy_) return;
  busy_ = busy;
  thread_busy_->fetch_add(busy ? 1 : -1);
}

void HttpConnection::ArmTimer(std::chrono::milliseconds after) {
  const std::uint64_t generation = ++timer_generation_;
  timed_out_ = false;
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
    if (ec || generation != self->timer_generation_ || self->closed_) return;
    self->timed_out_ = true;
    error_code ignored;
    self->socket_.cancel(ignored);
  });
}

void HttpConnection::DisarmTimer() {
  ++timer_generation_;
  timer_.cancel();
}

void HttpConnection::ReadIdle() {
  if (closed_) return;
  if (state_->draining) return Close();
  if (buffer_.size() > 0) return ReadHeader();
  idle_ = true;
  ArmTimer(state_->timeouts.idle);
  socket_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](error_code ec, std::size_t n) {
                            self->idle_ = false;
                            self->DisarmTimer();
                            if (ec || n == 0) return self->Close();
                            self->buffer_.commit(n);
                            self->ReadHeader();
                          });
}

void HttpConnection::ReadHeader() {
  if (closed_) return;
  SetBusy(true);
  parser_.emplace();
  ConfigureRequestParser(*parser_, state_->limits);
  route_.reset();
  ArmTimer(state_->timeouts.read);
  bhttp::async_read_header(socket_, buffer_, *parser_,
                           [self = shared_from_this()](error_code ec, std::size_t) {
                             self->DisarmTimer();
                             self->OnHeader(ec);
                           });
}

void HttpConnection::OnHeader(error_code ec) {
  if (closed_) return;
  if (ec) {
    if (timed_out_) {
      return Fail(JsonErrorReply(408, "request header not complete within " +
                                          std::to_string(state_->timeouts.read.count()) + " ms"));
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec == net::error::eof || ec == net::error::connection_reset) {
      return Close();  // the client left mid-request: nobody to answer
    }
    const auto data = buffer_.cdata();
    const std::string_view unparsed(static_cast<const char*>(data.data()), data.size());
    return Fail(DescribeParseError(ec, RefusedHead(ec, *parser_, unparsed), state_->limits));
  }
  version_ = parser_->get().version();
  bool send_continue = false;
  if (auto problem = CheckParsedHead(*parser_, state_->limits, &send_continue)) {
    return Fail(*problem);
  }
  if (send_continue) Queue("HTTP/1.1 100 Continue\r\n\r\n");
  ReadBody();
}

void HttpConnection::ReadBody() {
  if (parser_->is_done()) return OnBody({});
  ArmTimer(state_->timeouts.read);
  bhttp::async_read(socket_, buffer_, *parser_,
                    [self = shared_from_this()](error_code ec, std::size_t) {
                      self->DisarmTimer();
                      self->OnBody(ec);
                    });
}

void HttpConnection::OnBody(error_code ec) {
  if (closed_) return;
  if (ec) {
    if (timed_out_) {
      return Fail(JsonErrorReply(408, "request body not complete within " +
                                          std::to_string(state_->timeouts.read.count()) + " ms"));
    }
    if (ec == bhttp::error::partial_message || ec == bhttp::error::end_of_stream ||
        ec == net::error::eof || ec == net::error::connection_reset) {
      return Close();
    }
    const auto data = buffer_.cdata();
    return Fail(DescribeParseError(
        ec, std::string_view(static_cast<const char*>(data.data()), data.size()), state_->limits));
  }
  Dispatch();
}

void HttpConnection::Dispatch() {
  keep_alive_ = parser_->get().keep_alive() && !state_->draining;
  HttpRequest request = TakeRequest(*parser_);
  parser_.reset();
  answer_started_ = answer_done_ = chunked_ = half_closed_ = false;
  request_read_at_ = std::chrono::steady_clock::now();

  exchange_ = std::make_shared<ConnectionExchange>(weak_from_this(), state_);
  // NOTE: exchanges hold the connection weakly (a core callback must never keep it past the
  // server's life), and a half-closed client leaves no read pending: this keeps the connection
  // until the answer is out.
  self_while_answering_ = shared_from_this();
  exchange_->self_ = exchange_;
  Watch();
  HttpRouter::Match match = state_->router->Find(request);
  if (match.handler == nullptr) return exchange_->Reply(std::move(match.reply));
  std::shared_ptr<HttpExchange> exchange = exchange_;
  try {
    (*match.handler)(request, exchange);
  } catch (const std::exception& e) {
    exchange->Reply(
        JsonErrorReply(500, std::string("internal error while handling the request: ") + e.what()));
  }
}

bool HttpConnection::IsCurrent(const ConnectionExchange* exchange) const {
  return !closed_ && exchange_.get() == exchange;
}

void HttpConnection::Watch() {
  if (watching_ || closed_ || half_closed_ || buffer_.size() >= kMaxPipelinedBytes) return;
  watching_ = true;
  socket_.async_read_some(
      buffer_.prepare(kReadChunk),
      [self = shared_from_this()](error_code ec, std::size_t n) { self->OnWatch(ec, n); });
}

void HttpConnection::OnWatch(error_code ec, std::size_t bytes) {
  watching_ = false;
  if (closed_) return;
  if (lingering_) return ec ? Close() : LingerRead();
  if (bytes > 0) buffer_.commit(bytes);
  if (read_after_watch_) {
    // AfterAnswer cancelled this read to start the next request's. It may have ended on its own
    // first: a keep-alive client sends its next request the moment the answer reaches it, which
    // can be before this side's write handler ran. Those bytes are the next request.
    read_after_watch_ = false;
    if (ec && ec != net::error::operation_aborted) return Close();
    return ReadIdle();
  }
  if (ec == net::error::operation_aborted) return;
  if (!exchange_) return;   // the answer is out and the connection closes (Fail)
  if (!ec) return Watch();  // the next request, pipelined: kept for later
  if (ec == net::error::eof &&
      std::chrono::steady_clock::now() - request_read_at_ < kHalfCloseGrace) {
    half_closed_ = true;
    keep_alive_ = false;
    return;
  }
  ClientGone();
}

void HttpConnection::ClientGone() {
  if (exchange_ && !answer_done_) exchange_->Gone();
  Close();
}

void HttpConnection::ExchangeReply(ConnectionExchange* exchange, const HttpReply& reply) {
  if (answer_started_) return;
  answer_started_ = answer_done_ = true;
  exchange->Answered();
  Queue(SerializeReply(reply, keep_alive_ && !state_->draining));
}

void HttpConnection::ExchangeStartStream(ConnectionExchange*, const HttpReply& head) {
  if (answer_started_) return;
  answer_started_ = true;
  chunked_ = version_ == 11;
  if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the body ends where the connection does
  Queue(SerializeStreamHead(head, chunked_));
}

void HttpConnection::ExchangeSend(ConnectionExchange*, std::string data) {
  if (!answer_started_ || answer_done_ || data.empty()) return;
  Queue(chunked_ ? FrameChunk(data) : std::move(data));
}

void HttpConnection::ExchangeEnd(ConnectionExchange* exchange) {
  if (!answer_started_ || answer_done_) return;
  answer_done_ = true;
  exchange->Answered();
  if (chunked_) {
    Queue(std::string(kLastChunk));
  } else if (writing_.empty() && queued_.empty()) {
    AfterAnswer();
  }
}

void HttpConnection::Queue(std::string bytes) {
  if (closed_) return;
  queued_.push_back(std::move(bytes));
  if (writing_.empty()) WriteQueued();
}

void HttpConnection::WriteQueued() {
  // Everything queued goes out in one gathered write: a burst of events is one syscall.
  std::vector<net::const_buffer> buffers;
  while (!queued_.empty()) {
    writing_.push_back(std::move(queued_.front()));
    queued_.pop_front();
  }
  buffers.reserve(writing_.size());
  for (const std::string& s : writing_) buffers.emplace_back(s.data(), s.size());
  net::async_write(socket_, buffers, [self = shared_from_this()](error_code ec, std::size_t) {
    self->OnWritten(ec);
  });
}

void HttpConnection::OnWritten(error_code ec) {
  writing_.clear();
  if (closed_) return;
  if (ec) return ClientGone();
  if (!queued_.empty()) return WriteQueued();
  if (answer_done_) AfterAnswer();
}

void HttpConnection::AfterAnswer() {
  exchange_.reset();
  self_while_answering_.reset();  // a caller up the stack still holds one
  SetBusy(false);
  if (!keep_alive_ || half_closed_ || state_->draining) return LingerClose();
  if (watching_) {
    // The watch read must end before the next request's read starts; its handler goes on.
    read_after_watch_ = true;
    error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  ReadIdle();
}

void HttpConnection::LingerClose() {
  error_code ignored;
  socket_.shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  if (half_closed_) return Close();
  // Reads until the client closes too or the linger time ends; what it sends is dropped.
  lingering_ = true;
  ArmTimer(std::chrono::duration_cast<std::chrono::milliseconds>(kLingerTime));
  if (!watching_) LingerRead();  // else the watch read's end goes on here
}

void HttpConnection::LingerRead() {
  buffer_.clear();
  socket_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](error_code ec, std::size_t) {
                            if (ec || self->closed_) return self->Close();
                            self->LingerRead();
                          });
}

void HttpConnection::Close() {
  if (closed_) return;
  closed_ = true;
  idle_ = false;
  DisarmTimer();
  if (exchange_ && !answer_done_) exchange_->Gone();
  exchange_.reset();
  self_while_answering_.reset();  // a caller up the stack still holds one
  SetBusy(false);
  queued_.clear();
  error_code ignored;
  socket_.shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

void HttpConnection::Fail(const HttpReply& reply) {
  LOG_DEBUG("HTTP {}: {}", reply.status, reply.body);
  keep_alive_ = false;
  exchange_.reset();
  answer_started_ = answer_done_ = true;
  Queue(SerializeReply(reply, false));
}

}  // namespace inflight::server::http
