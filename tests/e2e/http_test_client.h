// A blocking HTTP/1.1 client for the frontend tests, on Boost.Beast: one connection per request,
// plus a streaming POST that hands the body to a callback as chunks arrive (for SSE).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace inflight::server::http::testing {

struct ClientResponse {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class TestHttpClient {
 public:
  explicit TestHttpClient(int port) : port_(port) {}

  std::optional<ClientResponse> Get(const std::string& path) { return Send("GET", path, ""); }
  std::optional<ClientResponse> Post(const std::string& path, const std::string& body) {
    return Send("POST", path, body);
  }

  // POSTs and reads the response; `on_body` gets each piece of the body as it arrives and returns
  // false to hang up. nullopt when the connection failed before a response head.
  std::optional<ClientResponse> Send(
      const std::string& method, const std::string& path, const std::string& body,
      const std::function<bool(std::string_view)>& on_body = nullptr) {
    namespace bhttp = boost::beast::http;
    namespace net = boost::asio;
    boost::system::error_code ec;
    net::io_context ioc;
    net::ip::tcp::socket socket(ioc);
    socket.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)}, ec);
    if (ec) return std::nullopt;
    bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(method), path, 11);
    req.set(bhttp::field::host, "127.0.0.1");
    if (!body.empty() || method == "POST") {
      req.set(bhttp::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    bhttp::write(socket, req, ec);
    if (ec) return std::nullopt;

    boost::beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(1u << 30);
    bool keep_reading = true;
    std::string streamed;
    // NOTE: Beast keeps a reference to the callback, which must outlive the reads.
    auto on_chunk = [&](std::uint64_t, boost::string_view data, boost::system::error_code&) {
      if (keep_reading) keep_reading = on_body(std::string_view(data.data(), data.size()));
      streamed.append(data.data(), data.size());
      return data.size();
    };
    if (on_body) parser.on_chunk_body(on_chunk);
    bhttp::read_header(socket, buffer, parser, ec);
    if (ec) return std::nullopt;
    ClientResponse out;
    out.status = parser.get().result_int();
    for (const auto& field : parser.get()) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(field.value());
    }
    while (!parser.is_done() && keep_reading) {
      bhttp::read_some(socket, buffer, parser, ec);
      if (ec) break;
    }
    out.body = on_body && parser.chunked() ? streamed : parser.get().body();
    if (!keep_reading) {
      // A client that goes away: no goodbye, the socket just closes.
      socket.close(ec);
    }
    return out;
  }

 private:
  int port_;
};

}  // namespace inflight::server::http::testing
