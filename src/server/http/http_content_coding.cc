#include "server/http/http_content_coding.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <utility>

namespace inflight::server::http {
namespace {

// zlib's windowBits: 15 (the largest window) reads the zlib format; +16 reads gzip instead.
constexpr int kZlibWindowBits = 15;
constexpr int kGzipWindowBits = 15 + 16;
constexpr std::size_t kInflateChunk = 64u << 10;

std::string LowerTrimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

HttpReply UnsupportedCoding(std::string_view coding) {
  // RFC 9110 15.5.16: 415 for a content coding the server does not take, with Accept-Encoding
  // naming those it does (12.5.3).
  HttpReply reply = JsonErrorReply(
      415, "Content-Encoding \"" + std::string(coding) +
               "\" is not supported; use one of: " + std::string(kAcceptedContentCodings));
  reply.headers.emplace_back("Accept-Encoding", std::string(kAcceptedContentCodings));
  return reply;
}

// Closes a z_stream however Inflate leaves.
struct InflateStream {
  z_stream stream{};
  bool open = false;
  ~InflateStream() {
    if (open) inflateEnd(&stream);
  }
};

std::optional<HttpReply> Inflate(std::string_view in, const std::string& coding, int window_bits,
                                 std::size_t max_bytes, std::string& out) {
  if (in.size() > std::numeric_limits<uInt>::max()) {
    return JsonErrorReply(413, "a " + coding + " request body of " + std::to_string(in.size()) +
                                   " bytes is more than this server inflates");
  }
  InflateStream z;
  if (inflateInit2(&z.stream, window_bits) != Z_OK) {
    return JsonErrorReply(500, "could not start inflating the " + coding + " request body");
  }
  z.open = true;
  z.stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.stream.avail_in = static_cast<uInt>(in.size());
  std::string chunk(kInflateChunk, '\0');
  while (true) {
    z.stream.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.stream.avail_out = static_cast<uInt>(chunk.size());
    const int ret = inflate(&z.stream, Z_NO_FLUSH);
    const std::size_t produced = chunk.size() - z.stream.avail_out;
    if (out.size() + produced > max_bytes) {
      return JsonErrorReply(413, "the " + coding +
                                     " request body inflates to more than the limit of " +
                                     std::to_string(max_bytes) + " bytes (--http-max-input-size)");
    }
    out.append(chunk.data(), produced);
    if (ret == Z_STREAM_END) break;
    if (ret == Z_BUF_ERROR && z.stream.avail_in == 0) {
      return JsonErrorReply(400, "the " + coding +
                                     " request body ends before its compressed data does (" +
                                     std::to_string(in.size()) + " bytes read)");
    }
    if (ret != Z_OK && ret != Z_BUF_ERROR) {
      return JsonErrorReply(400, "the request body is not valid " + coding +
                                     " data: " + (z.stream.msg ? z.stream.msg : zError(ret)));
    }
  }
  if (z.stream.avail_in != 0) {
    return JsonErrorReply(400, "the " + coding + " request body has " +
                                   std::to_string(z.stream.avail_in) +
                                   " bytes after the end of its compressed data");
  }
  return std::nullopt;
}

// The q value of one Accept-Encoding item's parameters ("; q=0.5"); 1 when absent or unreadable.
double QValue(std::string_view parameters) {
  for (std::size_t start = 0; start < parameters.size();) {
    std::size_t end = parameters.find(';', start);
    if (end == std::string_view::npos) end = parameters.size();
    const std::string item = LowerTrimmed(parameters.substr(start, end - start));
    if (item.rfind("q=", 0) == 0) {
      double q = 1.0;
      auto [ptr, ec] = std::from_chars(item.data() + 2, item.data() + item.size(), q);
      return ec == std::errc() && ptr == item.data() + item.size() ? q : 1.0;
    }
    start = end + 1;
  }
  return 1.0;
}

}  // namespace

std::string ChooseResponseCoding(const HttpRequest& request) {
  std::string best;
  double best_q = 0.0;
  for (std::string_view field : HeaderValues(request, "Accept-Encoding")) {
    for (std::size_t start = 0; start <= field.size();) {
      std::size_t end = field.find(',', start);
      if (end == std::string_view::npos) end = field.size();
      const std::string_view item = field.substr(start, end - start);
      const std::size_t semicolon = item.find(';');
      std::string coding = LowerTrimmed(item.substr(0, semicolon));
      const double q =
          semicolon == std::string_view::npos ? 1.0 : QValue(item.substr(semicolon + 1));
      if (coding == "*") coding = "gzip";
      if ((coding == "gzip" || coding == "deflate") && q > best_q) {
        best = coding;
        best_q = q;
      }
      start = end + 1;
    }
  }
  return best;
}

void EncodeReply(HttpReply& reply, std::string_view coding) {
  if (coding.empty() || reply.body.size() > std::numeric_limits<uInt>::max()) return;
  z_stream z{};
  const int window_bits = coding == "gzip" ? kGzipWindowBits : kZlibWindowBits;
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return;  // as Triton does when compressing fails: the answer goes uncompressed
  }
  std::string out(deflateBound(&z, reply.body.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(reply.body.data());
  z.avail_in = static_cast<uInt>(reply.body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int ret = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (ret != Z_STREAM_END) return;
  reply.body = std::move(out);
  reply.headers.emplace_back("Content-Encoding", std::string(coding));
}

std::optional<HttpReply> DecodedBody::Decode(std::size_t max_bytes) {
  const auto fields = HeaderValues(request_, "Content-Encoding");
  if (fields.empty()) return std::nullopt;
  std::string coding = LowerTrimmed(fields.front());
  for (std::size_t i = 1; i < fields.size(); ++i) {
    coding += ", " + LowerTrimmed(fields[i]);  // RFC 9110 5.3: repeated fields are one list
  }
  if (coding.empty() || coding == "identity") return std::nullopt;
  int window_bits = 0;
  if (coding == "gzip" || coding == "x-gzip") {
    window_bits = kGzipWindowBits;
  } else if (coding == "deflate") {
    window_bits = kZlibWindowBits;
  } else {
    return UnsupportedCoding(coding);  // brotli, zstd, or more than one coding
  }
  inflated_.emplace();
  return Inflate(request_.body, coding, window_bits, max_bytes, *inflated_);
}

}  // namespace inflight::server::http
