// Request bodies sent with a Content-Encoding (RFC 9110 8.4). Triton's HTTP frontend inflates gzip
// and deflate infer bodies (its DataCompressor; tritonclient.http's request_compression_algorithm
// sends them), so /infer does too; other codings are refused with 415.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/http/http_message.h"

namespace inflight::server::http {

// A request body with its content coding undone.
class DecodedBody {
 public:
  explicit DecodedBody(const HttpRequest& request) : request_(request) {}

  // Inflates the body when its Content-Encoding is gzip or deflate (the zlib format, as RFC 9110
  // 8.4.1.2 and tritonclient's zlib.compress mean it); identity or none leaves it as is. The reply
  // to send instead when it cannot: 415 (with Accept-Encoding) for another coding, 400 for data
  // that does not inflate, 413 when the inflated body would pass `max_bytes` (the same limit as a
  // plain body's, so a small compressed body cannot make a huge one).
  std::optional<HttpReply> Decode(std::size_t max_bytes);

  std::string_view body() const { return inflated_ ? std::string_view(*inflated_) : request_.body; }

 private:
  const HttpRequest& request_;
  std::optional<std::string> inflated_;
};

// The content codings Decode takes, for Accept-Encoding in a 415.
inline constexpr std::string_view kAcceptedContentCodings = "gzip, deflate, identity";

// The coding to answer with, from the request's Accept-Encoding (RFC 9110 12.5.3): "gzip" or
// "deflate" when the client lists one with q > 0 (the higher q wins, then the first listed; "*"
// counts as gzip), else "" (identity), as Triton's GetResponseCompressionType chooses.
std::string ChooseResponseCoding(const HttpRequest& request);

// Compresses reply.body with `coding` ("gzip" or "deflate") and says so in Content-Encoding; ""
// leaves the reply as it is. Inference-Header-Content-Length keeps counting the uncompressed JSON,
// as in Triton's InferRequestClass::FinalizeResponse (the client inflates first, then splits).
void EncodeReply(HttpReply& reply, std::string_view coding);

}  // namespace inflight::server::http
