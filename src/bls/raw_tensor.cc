#include "bls/raw_tensor.h"

#include <iterator>

namespace inflight::bls {

namespace {
// Indexed by TRITONSERVER_DataType (values fixed by Triton's ABI).
constexpr const char* kNames[] = {"INVALID", "BOOL", "UINT8", "UINT16", "UINT32",
                                  "UINT64",  "INT8", "INT16", "INT32",  "INT64",
                                  "FP16",    "FP32", "FP64",  "BYTES",  "BF16"};
constexpr uint32_t kSizes[] = {0, 1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 0, 2};
}  // namespace

uint32_t DataTypeSize(TRITONSERVER_DataType datatype) {
  const auto i = static_cast<unsigned>(datatype);
  return i < std::size(kSizes) ? kSizes[i] : 0;
}

const char* DataTypeName(TRITONSERVER_DataType datatype) {
  const auto i = static_cast<unsigned>(datatype);
  return i < std::size(kNames) ? kNames[i] : kNames[0];
}

Result<std::vector<std::string>> BytesElements(const RawTensor& t) {
  std::vector<std::string> out;
  size_t offset = 0;
  while (offset < t.data.size()) {
    if (t.data.size() - offset < 4) {
      return InvalidArgument("input '" + t.name + "': BYTES element " + std::to_string(out.size()) +
                             " has a truncated length prefix");
    }
    uint32_t len = 0;
    std::memcpy(&len, t.data.data() + offset, 4);
    offset += 4;
    if (t.data.size() - offset < len) {
      return InvalidArgument("input '" + t.name + "': BYTES element " + std::to_string(out.size()) +
                             " claims " + std::to_string(len) + " bytes, only " +
                             std::to_string(t.data.size() - offset) + " remain");
    }
    out.emplace_back(t.data.data() + offset, len);
    offset += len;
  }
  return out;
}

RawTensor MakeBytesTensor(std::string name, std::vector<int64_t> shape,
                          const std::vector<std::string>& elements) {
  RawTensor t{std::move(name), TRITONSERVER_TYPE_BYTES, std::move(shape), {}};
  for (const std::string& e : elements) {
    const auto len = static_cast<uint32_t>(e.size());
    const char* p = reinterpret_cast<const char*>(&len);
    t.data.insert(t.data.end(), p, p + 4);
    t.data.insert(t.data.end(), e.begin(), e.end());
  }
  return t;
}

namespace {

template <typename From, typename T>
T Read(const RawTensor& t) {
  From v;
  std::memcpy(&v, t.data.data(), sizeof(From));
  return static_cast<T>(v);
}

}  // namespace

template <typename T>
Result<T> FirstValue(const RawTensor& t) {
  const uint32_t size = DataTypeSize(t.datatype);
  if (size == 0 || t.data.size() < size) {
    return InvalidArgument("input '" + t.name + "' must hold a " +
                           (size == 0 ? "number" : "value") + ", got " +
                           (size == 0 ? std::string(DataTypeName(t.datatype)) : "no element"));
  }
  switch (t.datatype) {
    case TRITONSERVER_TYPE_BOOL:
      return static_cast<T>(t.data[0] != 0);
    case TRITONSERVER_TYPE_UINT8:
      return Read<uint8_t, T>(t);
    case TRITONSERVER_TYPE_UINT16:
      return Read<uint16_t, T>(t);
    case TRITONSERVER_TYPE_UINT32:
      return Read<uint32_t, T>(t);
    case TRITONSERVER_TYPE_UINT64:
      return Read<uint64_t, T>(t);
    case TRITONSERVER_TYPE_INT8:
      return Read<int8_t, T>(t);
    case TRITONSERVER_TYPE_INT16:
      return Read<int16_t, T>(t);
    case TRITONSERVER_TYPE_INT32:
      return Read<int32_t, T>(t);
    case TRITONSERVER_TYPE_INT64:
      return Read<int64_t, T>(t);
    case TRITONSERVER_TYPE_FP32:
      return Read<float, T>(t);
    case TRITONSERVER_TYPE_FP64:
      return Read<double, T>(t);
    default:
      return InvalidArgument("input '" + t.name + "': data type " + DataTypeName(t.datatype) +
                             " is not accepted here");
  }
}

template Result<bool> FirstValue<bool>(const RawTensor&);
template Result<int32_t> FirstValue<int32_t>(const RawTensor&);
template Result<int64_t> FirstValue<int64_t>(const RawTensor&);
template Result<float> FirstValue<float>(const RawTensor&);

Result<RawTensor> SliceRow(const RawTensor& t, int64_t row, int64_t batch) {
  if (t.shape.empty() || t.shape[0] != batch) {
    return InvalidArgument("input '" + t.name + "': its first dim must be the batch size " +
                           std::to_string(batch));
  }
  RawTensor out{t.name, t.datatype, t.shape, {}};
  out.shape[0] = 1;
  if (out.shape.size() == 1) out.shape.push_back(1);
  if (t.datatype != TRITONSERVER_TYPE_BYTES) {
    const size_t row_bytes = t.data.size() / static_cast<size_t>(batch);
    out.data.assign(t.data.begin() + row * row_bytes, t.data.begin() + (row + 1) * row_bytes);
    return out;
  }
  ASSIGN_OR_RETURN(std::vector<std::string> elements, BytesElements(t));
  const size_t per_row = elements.size() / static_cast<size_t>(batch);
  std::vector<std::string> mine(elements.begin() + row * per_row,
                                elements.begin() + (row + 1) * per_row);
  return MakeBytesTensor(t.name, out.shape, mine);
}

}  // namespace inflight::bls
