// One request's way back to its client. A handler gets it on an io thread and may answer at once
// or later from any thread (a core thread that delivers the model's responses): every call posts
// to the connection's strand, so answers are written in call order and never block the caller.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "server/http/http_message.h"

namespace inflight::server::http {

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  // A whole response. Only the first Reply or StartStream of an exchange counts.
  virtual void Reply(HttpReply reply) = 0;
  // A response whose body follows in pieces (Server-Sent Events): status, content type and
  // headers of `head` go out now; each Send adds to the body as it comes; End finishes it.
  virtual void StartStream(HttpReply head) = 0;
  virtual void Send(std::string data) = 0;
  virtual void End() = 0;
  // Runs `fn` on the connection's io strand, after what was posted before; dropped when the
  // connection is already gone. For work that belongs on an io thread (turning a response into
  // JSON) rather than on the core thread that delivered it.
  virtual void Dispatch(std::function<void()> fn) = 0;

  // Registers what to do when the client leaves before its answer is complete (or the server stops
  // and closes the connection): cancel the request. Runs once; at once when the client is gone;
  // dropped, never run, once the answer is complete.
  void OnClientGone(std::function<void()> on_gone);
  bool client_gone() const;

 protected:
  // The connection calls this when it loses the client; idempotent.
  void NotifyClientGone();
  // The connection calls this when the answer's last byte is queued. NOTE: the callback is let go
  // here because it usually holds what holds this exchange (a handler's state that answers
  // through it): kept until the exchange dies, that cycle leaked every answered request.
  void NotifyAnswered();

 private:
  mutable std::mutex mu_;
  bool gone_ = false;
  bool answered_ = false;
  std::function<void()> on_gone_;
};

}  // namespace inflight::server::http
