// Tensor <-> JSON for the KServe v2 HTTP protocol: datatype names ("INT32", "BYTES", ...), element
// parsing with range checks, and printing a tensor's elements as a flat JSON array.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "server/server_api.h"

namespace inflight::server::http {

// KServe v2 names, the same strings tritonserver prints: "BOOL", "UINT8", ..., "FP16", "BF16",
// "BYTES".
const char* DataTypeName(TRITONSERVER_DataType datatype);
std::optional<TRITONSERVER_DataType> ParseDataTypeName(std::string_view name);
// Bytes per element; 0 for BYTES (variable) and INVALID.
std::size_t DataTypeElementSize(TRITONSERVER_DataType datatype);

// Number of elements a shape holds; an error names `what` when a dim is negative or the product
// overflows.
Result<std::int64_t> ElementCount(const std::vector<std::int64_t>& shape, std::string_view what);

// Flattens `data` (a JSON array, nested to any depth up to a limit, or one scalar) and encodes the
// elements into tensor.data using tensor.datatype. Errors name the tensor, the element index, the
// value and the accepted form. Does not check the count against the shape: see CheckElementCount.
Status AppendJsonElements(const nlohmann::json& data, Tensor& tensor);

// Number of elements encoded in tensor.data (BYTES: walks the length prefixes).
Result<std::int64_t> EncodedElementCount(const Tensor& tensor);

// Errors when the encoded elements do not fill the tensor's shape exactly.
Status CheckElementCount(const Tensor& tensor);

// The tensor's elements as a flat JSON array (BYTES as strings, FP16/BF16 as numbers).
Result<nlohmann::json> TensorElementsToJson(const Tensor& tensor);

// Serializes JSON for the wire; invalid UTF-8 in strings (BYTES outputs) is replaced, never thrown.
std::string DumpJson(const nlohmann::json& value);

}  // namespace inflight::server::http
