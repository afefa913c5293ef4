#include "server/http/http_binary_tensors.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <utility>

#include "server/http/http_tensor_json.h"

namespace inflight::server::http {
namespace {

// NOTE: binary tensors are little-endian on the wire (extension_binary_data.md) and Tensor::data is
// in host order; they are the same bytes only on a little-endian host.
static_assert(std::endian::native == std::endian::little,
              "the binary tensor extension copies bytes as they are: a little-endian host only");

constexpr std::size_t kLengthPrefixBytes = 4;

std::string Quoted(std::string_view text) {
  return "\"" + std::string(text) + "\"";
}

std::string ShapeText(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out += (i ? "," : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

Result<std::size_t> ParseHeaderLength(std::string_view text) {
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  // NOTE: from_chars takes no sign and no spaces, so "-1", "+5" and " 5" are refused here (Beast
  // already strips the optional whitespace around a field value).
  if (text.empty() || ec != std::errc() || ptr != end) {
    return InvalidArgument(std::string(kInferHeaderContentLength) + " " + Quoted(text) +
                           " is not a non-negative decimal integer; it gives the length in bytes "
                           "of the JSON inference header at the start of the body");
  }
  return value;
}

// BYTES: a 4-byte little-endian length, then that many bytes, per element.
Status CheckBytesElements(std::string_view bytes, const Tensor& tensor, std::int64_t expected) {
  const std::string what = "input " + Quoted(tensor.name);
  std::int64_t count = 0;
  std::size_t offset = 0;
  while (offset < bytes.size()) {
    const std::size_t left = bytes.size() - offset;
    if (left < kLengthPrefixBytes) {
      return InvalidArgument(what + ": BYTES element " + std::to_string(count) + " at byte " +
                             std::to_string(offset) + " has only " + std::to_string(left) +
                             " of the 4 bytes of its length prefix (binary_data_size " +
                             std::to_string(bytes.size()) + ")");
    }
    std::uint32_t length = 0;
    std::memcpy(&length, bytes.data() + offset, sizeof(length));
    offset += kLengthPrefixBytes;
    if (bytes.size() - offset < length) {
      return InvalidArgument(
          what + ": BYTES element " + std::to_string(count) + " at byte " +
          std::to_string(offset - kLengthPrefixBytes) + " gives length " + std::to_string(length) +
          " but only " + std::to_string(bytes.size() - offset) + " bytes of its binary_data_size " +
          std::to_string(bytes.size()) + " are left");
    }
    offset += length;
    ++count;
  }
  if (count != expected) {
    return InvalidArgument(what + ": binary_data_size " + std::to_string(bytes.size()) + " holds " +
                           std::to_string(count) + " BYTES elements but shape " +
                           ShapeText(tensor.shape) + " needs " + std::to_string(expected) +
                           "; each element is a 4-byte little-endian length and its bytes");
  }
  return Status::Ok();
}

Status CheckFixedSizeElements(std::string_view bytes, const Tensor& tensor, std::int64_t expected) {
  const std::string what = "input " + Quoted(tensor.name);
  const std::size_t element_size = DataTypeElementSize(tensor.datatype);
  if (element_size == 0) {
    return InvalidArgument(what + ": datatype " +
                           std::to_string(static_cast<int>(tensor.datatype)) +
                           " cannot be sent as binary data");
  }
  const auto max_elements =
      static_cast<std::int64_t>(std::numeric_limits<std::int64_t>::max() / element_size);
  if (expected > max_elements ||
      static_cast<std::uint64_t>(expected) * element_size != bytes.size()) {
    return InvalidArgument(
        what + ": binary_data_size " + std::to_string(bytes.size()) + " does not match shape " +
        ShapeText(tensor.shape) + " of " + DataTypeName(tensor.datatype) + ", which is " +
        std::to_string(expected) + " elements of " + std::to_string(element_size) + " bytes");
  }
  if (tensor.datatype == TRITONSERVER_TYPE_BOOL) {
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      const auto byte = static_cast<unsigned char>(bytes[i]);
      if (byte > 1) {
        return InvalidArgument(what + ": BOOL element " + std::to_string(i) + " is byte " +
                               std::to_string(byte) +
                               "; a binary BOOL is one byte, 0 (false) or 1 (true)");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<InferBody> SplitInferBody(std::string_view body,
                                 const std::vector<std::string_view>& header_length_fields) {
  InferBody out;
  out.json = body;
  if (header_length_fields.empty()) return out;
  for (std::string_view other : header_length_fields) {
    if (other != header_length_fields.front()) {
      return InvalidArgument(std::string(kInferHeaderContentLength) + " is given " +
                             std::to_string(header_length_fields.size()) + " times, as " +
                             Quoted(header_length_fields.front()) + " and " + Quoted(other) +
                             "; give it once");
    }
  }
  ASSIGN_OR_RETURN(std::size_t length, ParseHeaderLength(header_length_fields.front()));
  if (length == 0) {
    // Triton reads 0 as a "raw" request: the whole body is the data of a model's only input.
    return InvalidArgument(std::string(kInferHeaderContentLength) +
                           " 0 (a raw binary request with no JSON header) is not supported; give "
                           "the length of the JSON inference header at the start of the body");
  }
  if (length > body.size()) {
    return InvalidArgument(std::string(kInferHeaderContentLength) + " " + std::to_string(length) +
                           " is more than the " + std::to_string(body.size()) +
                           "-byte request body; it gives the length of the JSON inference header "
                           "at the start of the body");
  }
  out.json = body.substr(0, length);
  out.binary = body.substr(length);
  out.has_header_length = true;
  return out;
}

Result<std::string_view> BinaryInputCursor::Take(const std::string& input, std::int64_t size) {
  const std::string what = "input " + Quoted(input);
  if (size > 0 && !body_.has_header_length) {
    return InvalidArgument(what + ": parameters.binary_data_size is " + std::to_string(size) +
                           " but the request has no " + std::string(kInferHeaderContentLength) +
                           " header, so no binary data follows the JSON; send that header with "
                           "the JSON's length in bytes");
  }
  const std::size_t left = body_.binary.size() - used_;
  if (size < 0 || static_cast<std::uint64_t>(size) > left) {
    return InvalidArgument(
        what + ": binary_data_size " + std::to_string(size) + " is more than the " +
        std::to_string(left) + " bytes of binary data left: the body has " +
        std::to_string(body_.binary.size()) + " bytes after its " +
        std::to_string(body_.json.size()) +
        "-byte JSON header, and the binary inputs before this one took " + std::to_string(used_));
  }
  std::string_view bytes = body_.binary.substr(used_, static_cast<std::size_t>(size));
  used_ += bytes.size();
  return bytes;
}

Status BinaryInputCursor::CheckAllUsed() const {
  if (used_ == body_.binary.size()) return Status::Ok();
  return InvalidArgument(std::to_string(body_.binary.size() - used_) +
                         " bytes of binary data follow the last binary input: the inputs' "
                         "binary_data_size values add up to " +
                         std::to_string(used_) + " but " + std::to_string(body_.binary.size()) +
                         " bytes follow the " + std::to_string(body_.json.size()) +
                         "-byte JSON header (" + std::string(kInferHeaderContentLength) + ")");
}

Result<std::int64_t> ParseBinaryDataSize(const nlohmann::json& value, const std::string& input) {
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() <=
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return value.get<std::int64_t>();
  }
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0) {
    return value.get<std::int64_t>();
  }
  return InvalidArgument("input " + Quoted(input) + ": parameters.binary_data_size must be a " +
                         "non-negative integer (the input's size in bytes), got " +
                         DumpJson(value));
}

Status SetBinaryTensorData(std::string_view bytes, Tensor& tensor) {
  ASSIGN_OR_RETURN(std::int64_t expected,
                   ElementCount(tensor.shape, "input " + Quoted(tensor.name)));
  if (tensor.datatype == TRITONSERVER_TYPE_BYTES) {
    RETURN_IF_ERROR(CheckBytesElements(bytes, tensor, expected));
  } else {
    RETURN_IF_ERROR(CheckFixedSizeElements(bytes, tensor, expected));
  }
  tensor.data.assign(bytes.begin(), bytes.end());
  return Status::Ok();
}

bool BinaryOutputChoice::IsBinary(const std::string& output) const {
  auto it = per_output_.find(output);
  return it != per_output_.end() ? it->second : default_binary_;
}

Result<bool> ParseBoolParameter(const nlohmann::json& value, std::string_view where) {
  if (!value.is_boolean()) {
    return InvalidArgument(std::string(where) + " must be true or false, got " + DumpJson(value));
  }
  return value.get<bool>();
}

HttpReply InferReply(std::string json_header, std::string_view binary) {
  if (binary.empty()) return JsonReply(200, std::move(json_header));
  HttpReply reply;
  reply.status = 200;
  reply.content_type = "application/octet-stream";
  reply.headers.emplace_back(std::string(kInferHeaderContentLength),
                             std::to_string(json_header.size()));
  reply.body = std::move(json_header);
  reply.body.append(binary);
  return reply;
}

}  // namespace inflight::server::http
