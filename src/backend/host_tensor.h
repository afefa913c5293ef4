// A tensor copied out of (or into) a Triton request/response, on the host. Used by the pure
// conversion functions, so those are testable without a Triton core.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "triton/core/tritonserver.h"

namespace inflight::backend {

struct HostTensor {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<std::int64_t> shape;
  std::vector<char> data;

  std::int64_t NumElements() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
  template <typename T>
  std::span<const T> As() const {
    return {reinterpret_cast<const T*>(data.data()), data.size() / sizeof(T)};
  }
  template <typename T>
  static HostTensor From(std::string name, TRITONSERVER_DataType dtype,
                         std::vector<std::int64_t> shape, std::span<const T> values) {
    HostTensor t{std::move(name), dtype, std::move(shape), {}};
    t.data.resize(values.size_bytes());
    if (!values.empty()) std::memcpy(t.data.data(), values.data(), values.size_bytes());
    return t;
  }
};

using TensorMap = std::map<std::string, HostTensor>;

// Triton's name of a datatype ("INT32", "BYTES", ...). Ours, so the conversions need no Triton
// core.
inline const char* DataTypeName(TRITONSERVER_DataType t) {
  static const char* const kNames[] = {"INVALID", "BOOL", "UINT8", "UINT16", "UINT32",
                                       "UINT64",  "INT8", "INT16", "INT32",  "INT64",
                                       "FP16",    "FP32", "FP64",  "BYTES",  "BF16"};
  const auto i = static_cast<unsigned>(t);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "INVALID";
}

}  // namespace inflight::backend
