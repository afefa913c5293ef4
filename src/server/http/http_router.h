// Routes: (method, path pattern) -> handler. A path that some route matches with another method is
// 405 with Allow (RFC 9110 15.5.6); a path no route matches is 404.
#pragma once

#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "server/http/http_message.h"

namespace inflight::server::http {

class HttpExchange;

// Runs on an io thread: must not wait. It answers through the exchange, now or later from any
// thread (HttpExchange is thread-safe).
using HttpHandler = std::function<void(HttpRequest& request, const std::shared_ptr<HttpExchange>&)>;
// A handler that answers at once.
using HttpSyncHandler = std::function<HttpReply(const HttpRequest& request)>;

class HttpRouter {
 public:
  // `pattern` is an ECMAScript regex matched against the whole path; its groups reach the handler
  // as HttpRequest::groups. Routes are tried in the order they were added.
  void Add(const std::string& method, const std::string& pattern, HttpHandler handler);
  void AddSync(const std::string& method, const std::string& pattern, HttpSyncHandler handler);

  struct Match {
    const HttpHandler* handler = nullptr;  // null: see `reply`
    HttpReply reply;                       // 404 or 405 when no route takes the request
  };
  // Fills request.groups when a route matches.
  Match Find(HttpRequest& request) const;

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    HttpHandler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace inflight::server::http
