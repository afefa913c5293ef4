// The KServe v2 binary tensor data extension (Triton's docs/protocol/extension_binary_data.md):
// tensors travel as raw bytes after the JSON inference header of an HTTP body instead of as JSON
// "data". tritonclient.http sends and asks for them this way by default.
//
//   | JSON inference header | input A's bytes | input B's bytes | ...
//   |<- Inference-Header- ->|<- A's binary_data_size ->|<- B's ... ->|
//   |   Content-Length      |
//
// Request: the inputs that carry parameters.binary_data_size own the bytes after the header, in the
// order they are listed. Response: the same layout for the outputs asked for as binary
// (outputs[i].parameters.binary_data, or the request's parameters.binary_data_output for all).
// Binary data is little-endian, row major, no padding; BOOL is one byte 0 or 1; a BYTES element is
// a 4-byte little-endian length followed by its bytes. That is also Tensor::data's layout, so a
// binary tensor is checked, not converted.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "server/http/http_message.h"
#include "server/server_api.h"

namespace inflight::server::http {

// The header field (request and response) that gives the JSON inference header's length in bytes.
inline constexpr std::string_view kInferHeaderContentLength = "Inference-Header-Content-Length";

// A request body cut at the end of its JSON inference header.
struct InferBody {
  std::string_view json;    // the JSON inference header
  std::string_view binary;  // what follows it: the binary inputs back to back
  // Whether the request gave Inference-Header-Content-Length; without it the whole body is JSON.
  bool has_header_length = false;
};

// Cuts `body` by the values of its Inference-Header-Content-Length fields (all of them, in order).
// None: the whole body is JSON. A value that is not a decimal integer, given twice with different
// values, 0 (Triton's "raw" request, not supported) or larger than the body is kInvalidArgument.
Result<InferBody> SplitInferBody(std::string_view body,
                                 const std::vector<std::string_view>& header_length_fields);

// Hands out the binary part of a request body, input by input, in the order the inputs are read.
class BinaryInputCursor {
 public:
  explicit BinaryInputCursor(const InferBody& body) : body_(body) {}

  // The next `size` bytes, for input `input`: an error names the input, the size asked for and
  // what is left.
  Result<std::string_view> Take(const std::string& input, std::int64_t size);
  // Errors when bytes are left over after the last binary input.
  Status CheckAllUsed() const;

 private:
  InferBody body_;
  std::size_t used_ = 0;
};

// An input's parameters.binary_data_size: a non-negative integer.
Result<std::int64_t> ParseBinaryDataSize(const nlohmann::json& value, const std::string& input);

// Checks `bytes` as the binary form of `tensor` (its name, datatype and shape set): fixed-size
// types must be exactly elements x element size bytes, BOOL bytes 0 or 1, BYTES a run of
// length-prefixed elements as many as the shape holds. Then they become tensor.data.
Status SetBinaryTensorData(std::string_view bytes, Tensor& tensor);

// Which outputs of a response go as binary data.
class BinaryOutputChoice {
 public:
  // parameters.binary_data_output of the request: the choice for outputs that do not say.
  void SetDefault(bool binary) { default_binary_ = binary; }
  // outputs[i].parameters.binary_data: overrides the default for that output.
  void Set(const std::string& output, bool binary) { per_output_[output] = binary; }
  bool IsBinary(const std::string& output) const;

 private:
  bool default_binary_ = false;
  std::map<std::string, bool> per_output_;
};

// A boolean parameter (binary_data, binary_data_output); anything else is kInvalidArgument naming
// `where` and the value.
Result<bool> ParseBoolParameter(const nlohmann::json& value, std::string_view where);

// The answer to an inference request: the JSON header and then `binary` (the binary outputs back to
// back). With binary bytes it is application/octet-stream with Inference-Header-Content-Length, as
// Triton's HTTP frontend answers (InferRequestClass::SetResponseHeader); without, plain JSON.
HttpReply InferReply(std::string json_header, std::string_view binary);

}  // namespace inflight::server::http
