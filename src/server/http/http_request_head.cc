#include "server/http/http_request_head.h"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

namespace inflight::server::http {

namespace bhttp = boost::beast::http;

void ConfigureRequestParser(RequestParser& parser, const HttpLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
}

std::optional<HttpReply> CheckParsedHead(const RequestParser& parser, const HttpLimits& limits,
                                         bool* send_continue) {
  *send_continue = false;
  const auto& head = parser.get();
  const unsigned version = head.version();
  std::optional<std::string_view> transfer_encoding;
  if (auto it = head.find(bhttp::field::transfer_encoding); it != head.end()) {
    transfer_encoding = std::string_view(it->value().data(), it->value().size());
  }
  const bool has_host = head.find(bhttp::field::host) != head.end();
  const auto target = head.target();
  if (auto problem = CheckRequestHead(version, std::string_view(target.data(), target.size()),
                                      transfer_encoding, has_host, limits)) {
    return problem;
  }
  // RFC 9110 10.1.1: a client that waits for 100 Continue gets it before its body is read.
  if (auto it = head.find(bhttp::field::expect);
      it != head.end() && version == 11 && !parser.is_done()) {
    if (!boost::beast::iequals(it->value(), "100-continue")) {
      return JsonErrorReply(417, "Expect: only 100-continue is understood");
    }
    *send_continue = true;
  }
  return std::nullopt;
}

std::string RefusedHead(const boost::system::error_code& ec, const RequestParser& parser,
                        std::string_view unparsed) {
  if (ec == bhttp::error::header_limit || ec == bhttp::error::bad_method ||
      ec == bhttp::error::bad_target || ec == bhttp::error::bad_version) {
    return std::string(unparsed);  // the request line was refused: nothing parsed yet
  }
  // Beast consumed the request line and the fields it accepted before the one it refused: put
  // them back in front of what is left, so that the error can name every value involved.
  std::string head = "-\r\n";
  for (const auto& field : parser.get()) {
    head += std::string(field.name_string()) + ": " + std::string(field.value()) + "\r\n";
  }
  head += unparsed;
  return head;
}

HttpRequest TakeRequest(RequestParser& parser) {
  auto message = parser.release();
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.path = request.target.substr(0, request.target.find('?'));
  for (const auto& field : message) {
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(message.body());
  return request;
}

}  // namespace inflight::server::http
