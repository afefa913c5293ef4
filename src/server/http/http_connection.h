// One client connection of HttpServer: reads requests with Beast's parser, hands them to the
// router's handlers and writes their answers, all on the connection's strand. Internal to
// HttpServer (http_server.cc); handlers only see HttpExchange.
//
//   idle --first byte--> header --> body --> handling --answer written--> idle (keep-alive)
//     |                    |          |         |                            or lingering close
//  timeout: close     timeout: 408  timeout: 408  client gone: cancel the request, close
//
// While a request is handled the socket is still read ("watched"), so that a client that leaves is
// noticed and its request cancelled at once, not when the answer fails to go out.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/http/http_router.h"
#include "server/http/http_wire.h"

namespace inflight::server::http {

class HttpConnection;
class ConnectionExchange;

struct HttpTimeouts {
  // A request's head, and then its body, must each arrive within this; else 408.
  std::chrono::milliseconds read{std::chrono::seconds(60)};
  // A keep-alive connection with no request started is closed after this.
  std::chrono::milliseconds idle{std::chrono::seconds(300)};
};

// What every connection of one server shares. Owned by shared_ptr so that a connection (kept by a
// late core callback) never points at a server that is gone.
struct HttpServerState {
  const HttpRouter* router = nullptr;
  HttpLimits limits;
  HttpTimeouts timeouts;
  std::atomic<bool> draining{false};

  // Posts reach the io_context only while it exists: the server closes the gate before destroying
  // it, and exchanges that outlive the server then drop what they post.
  std::mutex gate_mu;
  bool gate_open = true;

  std::mutex connections_mu;
  std::map<HttpConnection*, std::weak_ptr<HttpConnection>> connections;
};

// The io threads of a server mark themselves, so that posting code knows when the io_context is
// certainly alive (it runs on one of its threads) and when the gate must be taken.
void MarkIoThread(const HttpServerState* state);
bool OnIoThreadOf(const HttpServerState* state);

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  // `thread_busy` counts the busy connections (a request between its first byte and its answer's
  // last) of the io thread this connection lives on: what that thread's polling and the server's
  // WaitIdle read.
  HttpConnection(boost::asio::ip::tcp::socket socket, Strand strand,
                 std::shared_ptr<HttpServerState> state,
                 std::shared_ptr<std::atomic<int>> thread_busy);
  ~HttpConnection();

  void Start();
  // From any thread. Drain: close now if idle, else after the current answer. Abort: the client's
  // request is cancelled and the connection closed now.
  void Drain();
  void Abort();

  // From any thread: runs fn on the strand while the server lives; at once when called on it.
  void Post(std::function<void()> fn);
  // The same from a thread that holds state->gate_mu with the gate open.
  void PostUnderGate(std::function<void()> fn);

  // On the strand, from ConnectionExchange.
  void ExchangeReply(ConnectionExchange* exchange, const HttpReply& reply);
  void ExchangeStartStream(ConnectionExchange* exchange, const HttpReply& head);
  void ExchangeSend(ConnectionExchange* exchange, std::string data);
  void ExchangeEnd(ConnectionExchange* exchange);
  bool IsCurrent(const ConnectionExchange* exchange) const;

 private:
  void ReadIdle();
  void ReadHeader();
  void OnHeader(boost::system::error_code ec);
  void ReadBody();
  void OnBody(boost::system::error_code ec);
  void Dispatch();
  void Watch();
  void OnWatch(boost::system::error_code ec, std::size_t bytes);
  void ClientGone();
  void Fail(const HttpReply& reply);  // a protocol error: answer and close
  void Queue(std::string bytes);
  void WriteQueued();
  void OnWritten(boost::system::error_code ec);
  void AfterAnswer();
  void LingerClose();
  void LingerRead();
  void Close();
  void SetBusy(bool busy);
  void ArmTimer(std::chrono::milliseconds after);
  void DisarmTimer();

  std::shared_ptr<HttpServerState> state_;
  std::shared_ptr<std::atomic<int>> thread_busy_;
  Strand strand_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer timer_;
  std::uint64_t timer_generation_ = 0;
  bool timed_out_ = false;

  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::optional<HttpRouter::Match> route_;
  bool idle_ = false;
  bool busy_ = false;
  bool closed_ = false;

  // The request being answered.
  std::shared_ptr<ConnectionExchange> exchange_;
  std::shared_ptr<HttpConnection> self_while_answering_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool answer_started_ = false;
  bool answer_done_ = false;
  bool chunked_ = false;
  std::chrono::steady_clock::time_point request_read_at_;
  bool watching_ = false;
  bool read_after_watch_ = false;
  bool half_closed_ = false;
  bool lingering_ = false;

  std::deque<std::string> queued_;
  std::vector<std::string> writing_;
};

}  // namespace inflight::server::http
