// Request bodies with a Content-Encoding (src/server/http/http_content_coding.h): gzip and deflate
// inflate, other codings are 415, corrupt or truncated data 400, and the body limit holds for the
// inflated size.
#include "server/http/http_content_coding.h"

#include <zlib.h>

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace inflight::server::http {
namespace {

// What Python's gzip.compress (window_bits 31) and zlib.compress (15) make.
std::string Compress(const std::string& data, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}
constexpr int kGzip = 31;
constexpr int kZlib = 15;

HttpRequest WithCoding(const std::string& coding, std::string body) {
  HttpRequest req;
  if (!coding.empty()) req.headers = {{"Content-Encoding", coding}};
  req.body = std::move(body);
  return req;
}

std::string ErrorText(const HttpReply& reply) {
  return nlohmann::json::parse(reply.body)["error"].get<std::string>();
}

TEST(DecodedBody, IdentityAndNoCodingLeaveTheBody) {
  for (const char* coding : {"", "identity", "Identity"}) {
    HttpRequest req = WithCoding(coding, "{\"a\":1}");
    DecodedBody body(req);
    EXPECT_FALSE(body.Decode(100).has_value()) << coding;
    EXPECT_EQ(body.body(), "{\"a\":1}");
  }
}

TEST(DecodedBody, GzipAndDeflateInflate) {
  const std::string json(5000, 'x');
  for (auto [coding, bits] : {std::pair{"gzip", kGzip}, std::pair{"deflate", kZlib},
                              std::pair{"GZIP", kGzip}, std::pair{"x-gzip", kGzip}}) {
    HttpRequest req = WithCoding(coding, Compress(json, bits));
    DecodedBody body(req);
    auto refused = body.Decode(json.size());
    EXPECT_FALSE(refused.has_value()) << coding << ": " << (refused ? refused->body : "");
    EXPECT_EQ(body.body(), json) << coding;
  }
}

TEST(DecodedBody, OtherCodingsAre415WithWhatIsTaken) {
  for (const char* coding : {"br", "zstd", "gzip, gzip"}) {
    HttpRequest req = WithCoding(coding, "abc");
    DecodedBody body(req);
    auto refused = body.Decode(100);
    ASSERT_TRUE(refused.has_value()) << coding;
    EXPECT_EQ(refused->status, 415);
    EXPECT_NE(ErrorText(*refused).find(std::string("\"") + coding + "\""), std::string::npos)
        << refused->body;
    ASSERT_EQ(refused->headers.size(), 1u);
    EXPECT_EQ(refused->headers[0],
              (std::pair<std::string, std::string>{"Accept-Encoding", "gzip, deflate, identity"}));
  }
}

TEST(DecodedBody, CorruptTruncatedOrTrailingDataIs400) {
  const std::string gz = Compress(std::string(3000, 'y'), kGzip);
  HttpRequest plain = WithCoding("gzip", "{\"not\": \"compressed\"}");
  DecodedBody not_gzip(plain);
  auto refused = not_gzip.Decode(1 << 20);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(ErrorText(*refused).find("not valid gzip data"), std::string::npos) << refused->body;

  HttpRequest cut = WithCoding("gzip", gz.substr(0, gz.size() - 6));
  DecodedBody truncated(cut);
  refused = truncated.Decode(1 << 20);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(ErrorText(*refused).find("ends before"), std::string::npos) << refused->body;

  HttpRequest extra = WithCoding("gzip", gz + "tail");
  DecodedBody trailing(extra);
  refused = trailing.Decode(1 << 20);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(ErrorText(*refused).find("4 bytes after the end"), std::string::npos) << refused->body;
}

TEST(DecodedBody, TheBodyLimitHoldsForTheInflatedSize) {
  // 1 MiB of zeros compresses to about 1 KiB: under a 64 KiB limit as sent, far over it inflated.
  const std::string bomb = Compress(std::string(1 << 20, '\0'), kGzip);
  ASSERT_LT(bomb.size(), 64u << 10);
  HttpRequest req = WithCoding("gzip", bomb);
  DecodedBody body(req);
  auto refused = body.Decode(64u << 10);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 413);
  EXPECT_NE(ErrorText(*refused).find("65536"), std::string::npos) << refused->body;
  DecodedBody exact(req);
  EXPECT_FALSE(exact.Decode(1 << 20).has_value());
  EXPECT_EQ(exact.body().size(), 1u << 20);
}

TEST(ChooseResponseCoding, FollowsAcceptEncoding) {
  auto choose = [](std::vector<std::pair<std::string, std::string>> headers) {
    HttpRequest req;
    req.headers = std::move(headers);
    return ChooseResponseCoding(req);
  };
  EXPECT_EQ(choose({}), "");
  EXPECT_EQ(choose({{"Accept-Encoding", "gzip"}}), "gzip");  // tritonclient's
  EXPECT_EQ(choose({{"accept-encoding", "deflate"}}), "deflate");
  EXPECT_EQ(choose({{"Accept-Encoding", "deflate;q=0.5, gzip;q=0.8"}}), "gzip");
  EXPECT_EQ(choose({{"Accept-Encoding", "gzip; q=0.2, deflate"}}), "deflate");
  EXPECT_EQ(choose({{"Accept-Encoding", "gzip;q=0"}}), "");
  EXPECT_EQ(choose({{"Accept-Encoding", "br, identity"}}), "");
  EXPECT_EQ(choose({{"Accept-Encoding", "*"}}), "gzip");
  EXPECT_EQ(choose({{"Accept-Encoding", "br"}, {"Accept-Encoding", "deflate"}}), "deflate");
}

TEST(EncodeReply, CompressesWhatDecodedBodyInflates) {
  const std::string body = "{\"outputs\":[]}" + std::string(4000, 'z');
  for (const char* coding : {"gzip", "deflate"}) {
    HttpReply reply;
    reply.body = body;
    reply.headers = {{"Inference-Header-Content-Length", "14"}};
    EncodeReply(reply, coding);
    EXPECT_LT(reply.body.size(), body.size()) << coding;
    ASSERT_EQ(reply.headers.size(), 2u);
    EXPECT_EQ(reply.headers[0].second, "14");  // still the uncompressed JSON's length
    EXPECT_EQ(reply.headers[1], (std::pair<std::string, std::string>{"Content-Encoding", coding}));
    HttpRequest req = WithCoding(coding, reply.body);
    DecodedBody inflated(req);
    ASSERT_FALSE(inflated.Decode(1 << 20).has_value()) << coding;
    EXPECT_EQ(inflated.body(), body) << coding;
  }
  HttpReply plain;
  plain.body = body;
  EncodeReply(plain, "");
  EXPECT_EQ(plain.body, body);
  EXPECT_TRUE(plain.headers.empty());
}

}  // namespace
}  // namespace inflight::server::http
