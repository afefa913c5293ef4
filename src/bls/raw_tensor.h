// A tensor as the BLS model moves it between Triton requests: a Triton data type, a shape and the
// bytes (BYTES elements each with their 4-byte little-endian length, as Triton lays them out).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/status.h"
#include "triton/core/tritonserver.h"

namespace inflight::bls {

struct RawTensor {
  std::string name;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// Bytes per element (0 for BYTES and INVALID) and Triton's name of a data type. Local tables, not
// TRITONSERVER_DataType*: this code also runs in unit tests without a Triton core.
uint32_t DataTypeSize(TRITONSERVER_DataType datatype);
const char* DataTypeName(TRITONSERVER_DataType datatype);

// The BYTES elements of `t`, in order; an element that overruns the data is an error naming `t`.
Result<std::vector<std::string>> BytesElements(const RawTensor& t);
// A BYTES tensor of `elements` with `shape`.
RawTensor MakeBytesTensor(std::string name, std::vector<int64_t> shape,
                          const std::vector<std::string>& elements);

template <typename T>
RawTensor MakeTensor(std::string name, TRITONSERVER_DataType datatype, std::vector<int64_t> shape,
                     const std::vector<T>& values) {
  RawTensor t{std::move(name), datatype, std::move(shape), {}};
  t.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

// The first element of a fixed-size tensor, converted to T; an error names the tensor when it is
// empty or of a type that does not convert (BYTES).
template <typename T>
Result<T> FirstValue(const RawTensor& t);

// Row `row` of a batched tensor ([batch, ...] -> [1, ...]; [batch] -> [1, 1]).
Result<RawTensor> SliceRow(const RawTensor& t, int64_t row, int64_t batch);

}  // namespace inflight::bls
