// libFuzzer target: raw bytes of a client connection through what HttpConnection runs on them:
// Beast's request parser configured as every connection's (ConfigureRequestParser), fed by
// Beast's own read loop (read_header, then read) from a stream that hands the bytes over in
// pieces, then our checks of the head (CheckParsedHead) and the description of a refused request
// (RefusedHead + DescribeParseError). Several requests on one connection are read in turn, as
// keep-alive does.
//
// Input: byte 0 picks the piece size the stream delivers (1..64 bytes or everything at once),
// byte 1 small limits (so that 413/414/431 are reached with short inputs); the rest is the wire.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include "server/http/http_request_head.h"
#include "server/http/http_wire.h"

namespace {

namespace bhttp = boost::beast::http;
using inflight::server::http::HttpLimits;
using inflight::server::http::HttpReply;

// A SyncReadStream over the fuzz input: at most `piece` bytes per read_some, then eof, as a
// socket whose peer sent the bytes in small segments and then closed.
class PieceStream {
 public:
  PieceStream(std::string_view bytes, std::size_t piece) : bytes_(bytes), piece_(piece) {}

  template <class MutableBuffers>
  std::size_t read_some(const MutableBuffers& buffers, boost::system::error_code& ec) {
    ec = {};
    if (bytes_.empty()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    const std::size_t n = boost::asio::buffer_copy(
        buffers, boost::asio::buffer(bytes_.data(), std::min(piece_, bytes_.size())));
    bytes_.remove_prefix(n);
    return n;
  }
  template <class MutableBuffers>
  std::size_t read_some(const MutableBuffers& buffers) {
    boost::system::error_code ec;
    const std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  std::string_view bytes_;
  std::size_t piece_;
};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_http_request: %s\n", what.c_str());
  std::abort();
}

// Every answer to a refused request is an error status with a JSON body naming the problem.
void CheckErrorReply(const HttpReply& reply) {
  if (reply.status < 400 || reply.status > 599) Fail("error reply " + std::to_string(reply.status));
  if (reply.body.find("\"error\"") == std::string::npos) Fail("reply without error: " + reply.body);
  const std::string wire = inflight::server::http::SerializeReply(reply, false);
  if (wire.compare(0, 9, "HTTP/1.1 ") != 0) Fail("reply head: " + wire);
}

bool IsConnectionEnd(const boost::system::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
         ec == boost::asio::error::eof;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::size_t piece = data[0] >= 64 ? std::size_t{1} << 20 : std::size_t{data[0]} + 1;
  HttpLimits limits;
  if (data[1] & 1) {
    limits.max_body_bytes = 64;
    limits.max_header_bytes = 256;
    limits.max_target_bytes = 32;
  }
  PieceStream stream(std::string_view(reinterpret_cast<const char*>(data) + 2, size - 2), piece);
  boost::beast::flat_buffer buffer;
  // One request after another until the connection would close (as HttpConnection does).
  for (int request = 0; request < 64; ++request) {
    inflight::server::http::RequestParser parser;
    inflight::server::http::ConfigureRequestParser(parser, limits);
    boost::system::error_code ec;
    bhttp::read_header(stream, buffer, parser, ec);
    if (ec) {
      if (IsConnectionEnd(ec)) return 0;
      const auto unparsed = buffer.cdata();
      const std::string head = inflight::server::http::RefusedHead(
          ec, parser, std::string_view(static_cast<const char*>(unparsed.data()), unparsed.size()));
      CheckErrorReply(inflight::server::http::DescribeParseError(ec, head, limits));
      return 0;
    }
    bool send_continue = false;
    if (auto problem = inflight::server::http::CheckParsedHead(parser, limits, &send_continue)) {
      CheckErrorReply(*problem);
      return 0;
    }
    if (!parser.is_done()) bhttp::read(stream, buffer, parser, ec);
    if (ec) {
      if (IsConnectionEnd(ec)) return 0;
      const auto unparsed = buffer.cdata();
      CheckErrorReply(inflight::server::http::DescribeParseError(
          ec, std::string_view(static_cast<const char*>(unparsed.data()), unparsed.size()),
          limits));
      return 0;
    }
    const bool keep_alive = parser.get().keep_alive();
    const auto request_read = inflight::server::http::TakeRequest(parser);
    if (request_read.body.size() > limits.max_body_bytes) {
      Fail("body of " + std::to_string(request_read.body.size()) + " bytes passed the limit");
    }
    if (request_read.path.size() > request_read.target.size()) Fail("path longer than target");
    if (!keep_alive) return 0;
  }
  return 0;
}
