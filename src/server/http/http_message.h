// What a route handler sees of a request and what it answers: plain values, no Beast types, so
// handlers and their tests do not depend on the transport.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inflight::server::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // target without the query
  // The route pattern's groups: groups[i] is nullopt when group i did not take part in the match.
  std::vector<std::optional<std::string>> groups;
  // The header fields as received, in order, names as the client spelled them.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// The values of every header field called `name`, in order; names compare case-insensitively
// (RFC 9110 5.1).
std::vector<std::string_view> HeaderValues(const HttpRequest& request, std::string_view name);

struct HttpReply {
  int status = 200;
  std::string content_type;  // empty: no Content-Type (and the body should be empty)
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra header fields
};

// Triton's error shape: {"error": "<message>"} as application/json.
HttpReply JsonErrorReply(int status, const std::string& message);
HttpReply JsonReply(int status, std::string body);

}  // namespace inflight::server::http
