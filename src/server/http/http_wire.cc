#include "server/http/http_wire.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <vector>

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>

namespace inflight::server::http {
namespace {

namespace bhttp = boost::beast::http;

std::string StatusLine(int status) {
  const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) +
         "\r\n";
}

void AppendHeaders(std::string& out, const HttpReply& reply) {
  if (!reply.content_type.empty()) out += "Content-Type: " + reply.content_type + "\r\n";
  for (const auto& [name, value] : reply.headers) out += name + ": " + value + "\r\n";
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The head's lines after the request line, up to the empty line (or the end of `raw`).
std::vector<std::string_view> HeaderLines(std::string_view raw) {
  std::vector<std::string_view> lines;
  std::size_t pos = raw.find("\r\n");
  while (pos != std::string_view::npos) {
    const std::size_t start = pos + 2;
    const std::size_t end = raw.find("\r\n", start);
    if (end == std::string_view::npos || end == start) break;
    lines.push_back(raw.substr(start, end - start));
    pos = end;
  }
  return lines;
}

// Every Content-Length value in the head, as sent.
std::vector<std::string> ContentLengthValues(std::string_view raw) {
  std::vector<std::string> values;
  for (std::string_view line : HeaderLines(raw)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    if (Lower(Trim(line.substr(0, colon))) == "content-length")
      values.emplace_back(Trim(line.substr(colon + 1)));
  }
  return values;
}

std::string Quoted(std::string_view s) {
  constexpr std::size_t kMaxShown = 80;
  std::string shown(s.substr(0, kMaxShown));
  if (s.size() > kMaxShown) shown += "...";
  return nlohmann::json(shown).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool IsDecimal(std::string_view s) {
  if (s.empty()) return false;
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  return ec == std::errc() && end == s.data() + s.size();
}

std::string ContentLengthMessage(std::string_view raw) {
  const std::vector<std::string> values = ContentLengthValues(raw);
  for (const std::string& v : values) {
    // A list ("5, 5") is allowed by RFC 9110 when every member is the same number.
    std::string_view rest = v;
    while (true) {
      const std::size_t comma = rest.find(',');
      std::string_view item = Trim(rest.substr(0, comma));
      if (!IsDecimal(item)) {
        return "Content-Length " + Quoted(v) + " is not a non-negative decimal number of bytes";
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  std::string listed;
  for (const std::string& v : values) listed += (listed.empty() ? "" : ", ") + Quoted(v);
  if (values.size() > 1) return "conflicting Content-Length headers: " + listed;
  return "Content-Length " + listed + " cannot be used with Transfer-Encoding: chunked";
}

// The first header line that is not `name: value`.
std::optional<std::string_view> LineWithoutColon(std::string_view raw) {
  for (std::string_view line : HeaderLines(raw)) {
    if (line.find(':') == std::string_view::npos) return line;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string_view> HeaderValues(const HttpRequest& request, std::string_view name) {
  std::vector<std::string_view> values;
  for (const auto& [field, value] : request.headers) {
    if (Lower(field) == Lower(name)) values.emplace_back(value);
  }
  return values;
}

std::optional<HttpReply> CheckContentEncoding(const HttpRequest& request) {
  for (std::string_view coding : HeaderValues(request, "Content-Encoding")) {
    if (coding.empty() || Lower(coding) == "identity") continue;
    // RFC 9110 15.5.16: 415 for a content coding the server does not take, with Accept-Encoding
    // naming what it takes (12.5.3): a compressed body must be refused, never parsed as JSON.
    HttpReply reply = JsonErrorReply(
        415, "Content-Encoding \"" + std::string(coding) +
                 "\" is not supported: send the request body uncompressed (identity)");
    reply.headers.emplace_back("Accept-Encoding", "identity");
    return reply;
  }
  return std::nullopt;
}

HttpReply JsonErrorReply(int status, const std::string& message) {
  return JsonReply(status, nlohmann::json{{"error", message}}.dump(
                               -1, ' ', false, nlohmann::json::error_handler_t::replace));
}

HttpReply JsonReply(int status, std::string body) {
  HttpReply reply;
  reply.status = status;
  reply.content_type = "application/json";
  reply.body = std::move(body);
  return reply;
}

std::string SerializeReply(const HttpReply& reply, bool keep_alive) {
  std::string out = StatusLine(reply.status);
  out.reserve(out.size() + 128 + reply.body.size());
  AppendHeaders(out, reply);
  out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  out += reply.body;
  return out;
}

std::string SerializeStreamHead(const HttpReply& head, bool chunked) {
  std::string out = StatusLine(head.status);
  AppendHeaders(out, head);
  out += chunked ? "Transfer-Encoding: chunked\r\n" : "Connection: close\r\n";
  out += "\r\n";
  return out;
}

std::string FrameChunk(std::string_view data) {
  char size[20];
  auto [end, ec] = std::to_chars(size, size + sizeof(size), data.size(), 16);
  std::string out(size, end);
  out.reserve(out.size() + data.size() + 4);
  out += "\r\n";
  out += data;
  out += "\r\n";
  return out;
}

std::optional<HttpReply> CheckRequestHead(unsigned version, std::string_view target,
                                          std::optional<std::string_view> transfer_encoding,
                                          bool has_host, const HttpLimits& limits) {
  if (version != 10 && version != 11) {
    return JsonErrorReply(505, "HTTP version " + std::to_string(version / 10) + "." +
                                   std::to_string(version % 10) +
                                   " is not supported: this endpoint speaks HTTP/1.1 and 1.0");
  }
  if (target.size() > limits.max_target_bytes) {
    return JsonErrorReply(414, "request target of " + std::to_string(target.size()) +
                                   " bytes is longer than the limit of " +
                                   std::to_string(limits.max_target_bytes) + " bytes");
  }
  // RFC 9112 3.2: an HTTP/1.1 request without Host is 400.
  if (version == 11 && !has_host) return JsonErrorReply(400, "HTTP/1.1 request has no Host header");
  if (transfer_encoding) {
    if (version == 10) {
      return JsonErrorReply(400, "Transfer-Encoding is not allowed in an HTTP/1.0 request");
    }
    // RFC 9112 6.1: codings apply in order; chunked must be the last one of a request. Only
    // chunked is implemented: anything else is 501 (RFC 9112 6.1), a misplaced chunked 400 (6.3).
    std::vector<std::string> codings;
    std::string_view rest = *transfer_encoding;
    while (true) {
      const std::size_t comma = rest.find(',');
      std::string coding = Lower(Trim(rest.substr(0, comma)));
      if (const auto semi = coding.find(';'); semi != std::string::npos)
        coding = std::string(Trim(std::string_view(coding).substr(0, semi)));
      if (!coding.empty()) codings.push_back(coding);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    for (const std::string& coding : codings) {
      if (coding != "chunked") {
        return JsonErrorReply(501, "transfer coding " + Quoted(coding) +
                                       " is not supported; only chunked is accepted");
      }
    }
    if (codings.size() != 1) {
      return JsonErrorReply(400, "Transfer-Encoding " + Quoted(*transfer_encoding) +
                                     " must name chunked exactly once, as the last coding");
    }
  }
  return std::nullopt;
}

HttpReply DescribeParseError(const boost::system::error_code& ec, std::string_view raw,
                             const HttpLimits& limits) {
  using bhttp::error;
  if (ec == error::body_limit) {
    return JsonErrorReply(413, "request body is larger than the limit of " +
                                   std::to_string(limits.max_body_bytes) +
                                   " bytes (--http-max-input-size)");
  }
  if (ec == error::header_limit) {
    const std::size_t line_end = raw.find("\r\n");
    if (line_end == std::string_view::npos || line_end > limits.max_target_bytes) {
      return JsonErrorReply(414, "request line is longer than the limit of " +
                                     std::to_string(limits.max_target_bytes) + " bytes");
    }
    return JsonErrorReply(431, "request header is larger than the limit of " +
                                   std::to_string(limits.max_header_bytes) + " bytes");
  }
  if (ec == error::bad_content_length) return JsonErrorReply(400, ContentLengthMessage(raw));
  if (ec == error::bad_transfer_encoding) {
    return JsonErrorReply(
        400, "Transfer-Encoding must appear once and not together with Content-Length");
  }
  if (ec == error::bad_field || ec == error::bad_value || ec == error::bad_obs_fold) {
    if (auto line = LineWithoutColon(raw)) {
      return JsonErrorReply(400, "header line " + Quoted(*line) + " is not \"name: value\"");
    }
    return JsonErrorReply(400, "malformed header field: " + ec.message());
  }
  if (ec == error::bad_method) return JsonErrorReply(400, "malformed request method");
  if (ec == error::bad_target) return JsonErrorReply(400, "malformed request target");
  if (ec == error::bad_version) {
    // Beast reads only HTTP/1.x; a well-formed other version (HTTP/2.0) is 505, not 400.
    const std::string_view line = raw.substr(0, raw.find("\r\n"));
    const std::string_view version = line.substr(line.rfind(' ') + 1);
    if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && std::isdigit(version[5]) &&
        version[6] == '.' && std::isdigit(version[7])) {
      return JsonErrorReply(505, "HTTP version " + std::string(version.substr(5)) +
                                     " is not supported: this endpoint speaks HTTP/1.1 and 1.0");
    }
    return JsonErrorReply(400, "malformed HTTP version in the request line (expected HTTP/1.1)");
  }
  if (ec == error::bad_chunk || ec == error::bad_chunk_extension) {
    return JsonErrorReply(400, "malformed chunk in the chunked request body");
  }
  if (ec == error::bad_line_ending) {
    return JsonErrorReply(400, "request lines must end with CRLF");
  }
  return JsonErrorReply(400, "malformed HTTP request: " + ec.message());
}

}  // namespace inflight::server::http
