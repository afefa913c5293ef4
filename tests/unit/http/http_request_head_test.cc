#include <string>

#include <gtest/gtest.h>

#include "server/http/http_request_head.h"

namespace inflight::server::http {
namespace {

// Parses `wire` (one request) with the connection's parser settings; the head's checks' verdict.
std::optional<HttpReply> HeadVerdict(const std::string& wire, bool* send_continue) {
  RequestParser parser;
  ConfigureRequestParser(parser, HttpLimits{});
  parser.eager(false);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(wire), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_header_done());
  return CheckParsedHead(parser, HttpLimits{}, send_continue);
}

TEST(HttpRequestHeadTest, ExpectContinueOnlyBeforeABody) {
  bool send_continue = false;
  EXPECT_FALSE(
      HeadVerdict("POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                  "Content-Length: 2\r\n\r\n",
                  &send_continue));
  EXPECT_TRUE(send_continue);
  auto refused = HeadVerdict(
      "POST /x HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n", &send_continue);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 417);
}

TEST(HttpRequestHeadTest, MissingHostIsRefused) {
  bool send_continue = false;
  auto refused = HeadVerdict("GET / HTTP/1.1\r\n\r\n", &send_continue);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(refused->body.find("no Host header"), std::string::npos);
}

}  // namespace
}  // namespace inflight::server::http
