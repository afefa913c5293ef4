// HTTP/1.1 bytes on the wire: responses as text, chunk framing, and the RFC 9112 checks of a
// request head that Beast's parser leaves to its user (version, transfer codings, Host, target
// length), each answered with the status RFC 9110/9112 name and a message saying what was wrong.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <boost/system/error_code.hpp>

#include "server/http/http_message.h"

namespace inflight::server::http {

struct HttpLimits {
  std::size_t max_body_bytes = 64u << 20;    // --http-max-input-size: larger is 413
  std::size_t max_header_bytes = 64u << 10;  // request line and header fields: larger is 431 (414)
  std::size_t max_target_bytes = 8u << 10;   // the request target: longer is 414
};

// The whole response: status line, Content-Type, Content-Length, Connection: close when the
// connection ends after it, the extra headers, the body.
std::string SerializeReply(const HttpReply& reply, bool keep_alive);

// The head of a response whose body follows in pieces: chunked (HTTP/1.1), or delimited by closing
// the connection (an HTTP/1.0 client, which knows no chunks).
std::string SerializeStreamHead(const HttpReply& head, bool chunked);
// One chunk of a chunked body; `data` must not be empty (an empty chunk ends the body).
std::string FrameChunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// What the head of a parsed request needs before its body is read. `transfer_encoding` is the
// field's value (nullopt: absent); `version` is Beast's 10 * major + minor. nullopt: fine.
std::optional<HttpReply> CheckRequestHead(unsigned version, std::string_view target,
                                          std::optional<std::string_view> transfer_encoding,
                                          bool has_host, const HttpLimits& limits);

// 415 for a body sent with a Content-Encoding other than identity, for endpoints that read bodies
// as sent (generate; Triton's HandleGenerate refuses them too). nullopt: fine.
std::optional<HttpReply> CheckContentEncoding(const HttpRequest& request);

// The reply to a request Beast's parser refused with `ec`; `raw` is what is left of the request's
// bytes in the read buffer (the whole head when the head was refused), used to name the bad line.
HttpReply DescribeParseError(const boost::system::error_code& ec, std::string_view raw,
                             const HttpLimits& limits);

}  // namespace inflight::server::http
