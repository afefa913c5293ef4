#include "server/http/http_router.h"

#include <algorithm>

#include "server/http/http_exchange.h"

namespace inflight::server::http {

void HttpRouter::Add(const std::string& method, const std::string& pattern, HttpHandler handler) {
  routes_.push_back(Route{method, std::regex(pattern, std::regex::ECMAScript), std::move(handler)});
}

void HttpRouter::AddSync(const std::string& method, const std::string& pattern,
                         HttpSyncHandler handler) {
  Add(method, pattern,
      [handler = std::move(handler)](HttpRequest& request,
                                     const std::shared_ptr<HttpExchange>& exchange) {
        exchange->Reply(handler(request));
      });
}

HttpRouter::Match HttpRouter::Find(HttpRequest& request) const {
  std::vector<std::string> allowed;
  std::smatch groups;
  for (const Route& route : routes_) {
    if (!std::regex_match(request.path, groups, route.pattern)) continue;
    if (route.method != request.method) {
      if (std::find(allowed.begin(), allowed.end(), route.method) == allowed.end())
        allowed.push_back(route.method);
      continue;
    }
    request.groups.clear();
    for (std::size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].matched) {
        request.groups.emplace_back(groups[i].str());
      } else {
        request.groups.emplace_back(std::nullopt);
      }
    }
    return Match{&route.handler, {}};
  }
  if (allowed.empty()) {
    return Match{nullptr,
                 JsonErrorReply(404, "no endpoint " + request.method + " " + request.path)};
  }
  std::string allow;
  for (const std::string& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
  HttpReply reply = JsonErrorReply(405, "method " + request.method + " is not allowed on " +
                                            request.path + " (allowed: " + allow + ")");
  reply.headers.emplace_back("Allow", allow);
  return Match{nullptr, std::move(reply)};
}

}  // namespace inflight::server::http
