#include "server/http/http_tensor_json.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "common/dtype.h"

namespace inflight::server::http {
namespace {

using nlohmann::json;

// Deeper JSON nesting than any real tensor rank is refused before it can cost stack.
constexpr int kMaxNestingDepth = 64;

struct NamedType {
  TRITONSERVER_DataType type;
  const char* name;
  std::size_t size;
};

constexpr std::array<NamedType, 14> kTypes = {{
    {TRITONSERVER_TYPE_BOOL, "BOOL", 1},
    {TRITONSERVER_TYPE_UINT8, "UINT8", 1},
    {TRITONSERVER_TYPE_UINT16, "UINT16", 2},
    {TRITONSERVER_TYPE_UINT32, "UINT32", 4},
    {TRITONSERVER_TYPE_UINT64, "UINT64", 8},
    {TRITONSERVER_TYPE_INT8, "INT8", 1},
    {TRITONSERVER_TYPE_INT16, "INT16", 2},
    {TRITONSERVER_TYPE_INT32, "INT32", 4},
    {TRITONSERVER_TYPE_INT64, "INT64", 8},
    {TRITONSERVER_TYPE_FP16, "FP16", 2},
    {TRITONSERVER_TYPE_FP32, "FP32", 4},
    {TRITONSERVER_TYPE_FP64, "FP64", 8},
    {TRITONSERVER_TYPE_BYTES, "BYTES", 0},
    {TRITONSERVER_TYPE_BF16, "BF16", 2},
}};

template <typename T>
void AppendRaw(std::vector<char>& out, T value) {
  const auto* p = reinterpret_cast<const char*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T ReadRaw(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

std::string Describe(const json& value) {
  std::string text = DumpJson(value);
  if (text.size() > 64) text = text.substr(0, 61) + "...";
  return text;
}

class ElementEncoder {
 public:
  explicit ElementEncoder(Tensor& tensor) : tensor_(tensor) {}

  Status Walk(const json& node, int depth) {
    if (depth > kMaxNestingDepth) {
      return InvalidArgument("input \"" + tensor_.name + "\": 'data' is nested deeper than " +
                             std::to_string(kMaxNestingDepth) + " levels");
    }
    if (node.is_array()) {
      for (const json& child : node) RETURN_IF_ERROR(Walk(child, depth + 1));
      return Status::Ok();
    }
    RETURN_IF_ERROR(Encode(node));
    ++index_;
    return Status::Ok();
  }

 private:
  Status Refuse(const json& value, const char* accepted) const {
    return InvalidArgument("input \"" + tensor_.name + "\": element " + std::to_string(index_) +
                           " is " + Describe(value) + " but datatype " +
                           DataTypeName(tensor_.datatype) + " accepts " + accepted);
  }

  template <typename T>
  Status EncodeInteger(const json& value) {
    const char* accepted =
        std::is_signed_v<T> ? "an integer in its range" : "a non-negative integer in its range";
    if (value.is_number_unsigned()) {
      auto v = value.get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
        return Refuse(value, accepted);
      AppendRaw(tensor_.data, static_cast<T>(v));
      return Status::Ok();
    }
    if (value.is_number_integer()) {
      auto v = value.get<std::int64_t>();
      if constexpr (std::is_signed_v<T>) {
        if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
            v > static_cast<std::int64_t>(std::numeric_limits<T>::max())) {
          return Refuse(value, accepted);
        }
      } else {
        if (v < 0 || static_cast<std::uint64_t>(v) >
                         static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
          return Refuse(value, accepted);
        }
      }
      AppendRaw(tensor_.data, static_cast<T>(v));
      return Status::Ok();
    }
    return Refuse(value, accepted);
  }

  Status Encode(const json& value) {
    switch (tensor_.datatype) {
      case TRITONSERVER_TYPE_BOOL:
        if (!value.is_boolean()) return Refuse(value, "true or false");
        AppendRaw<std::uint8_t>(tensor_.data, value.get<bool>() ? 1 : 0);
        return Status::Ok();
      case TRITONSERVER_TYPE_UINT8:
        return EncodeInteger<std::uint8_t>(value);
      case TRITONSERVER_TYPE_UINT16:
        return EncodeInteger<std::uint16_t>(value);
      case TRITONSERVER_TYPE_UINT32:
        return EncodeInteger<std::uint32_t>(value);
      case TRITONSERVER_TYPE_UINT64:
        return EncodeInteger<std::uint64_t>(value);
      case TRITONSERVER_TYPE_INT8:
        return EncodeInteger<std::int8_t>(value);
      case TRITONSERVER_TYPE_INT16:
        return EncodeInteger<std::int16_t>(value);
      case TRITONSERVER_TYPE_INT32:
        return EncodeInteger<std::int32_t>(value);
      case TRITONSERVER_TYPE_INT64:
        return EncodeInteger<std::int64_t>(value);
      case TRITONSERVER_TYPE_FP16:
      case TRITONSERVER_TYPE_BF16:
      case TRITONSERVER_TYPE_FP32:
      case TRITONSERVER_TYPE_FP64: {
        if (!value.is_number()) return Refuse(value, "a number");
        const double v = value.get<double>();
        if (tensor_.datatype == TRITONSERVER_TYPE_FP64) {
          AppendRaw(tensor_.data, v);
        } else if (tensor_.datatype == TRITONSERVER_TYPE_FP32) {
          AppendRaw(tensor_.data, static_cast<float>(v));
        } else if (tensor_.datatype == TRITONSERVER_TYPE_FP16) {
          AppendRaw(tensor_.data, FloatToFp16(static_cast<float>(v)));
        } else {
          AppendRaw(tensor_.data, FloatToBf16(static_cast<float>(v)));
        }
        return Status::Ok();
      }
      case TRITONSERVER_TYPE_BYTES: {
        if (!value.is_string()) return Refuse(value, "a string");
        const auto& s = value.get_ref<const std::string&>();
        if (s.size() > std::numeric_limits<std::uint32_t>::max())
          return Refuse(value, "a string under 4 GiB");
        AppendRaw(tensor_.data, static_cast<std::uint32_t>(s.size()));
        tensor_.data.insert(tensor_.data.end(), s.begin(), s.end());
        return Status::Ok();
      }
      default:
        return InvalidArgument("input \"" + tensor_.name + "\": datatype " +
                               std::to_string(static_cast<int>(tensor_.datatype)) +
                               " cannot be sent as JSON");
    }
  }

  Tensor& tensor_;
  std::int64_t index_ = 0;
};

}  // namespace

const char* DataTypeName(TRITONSERVER_DataType datatype) {
  for (const auto& t : kTypes) {
    if (t.type == datatype) return t.name;
  }
  return "INVALID";
}

std::optional<TRITONSERVER_DataType> ParseDataTypeName(std::string_view name) {
  for (const auto& t : kTypes) {
    if (name == t.name) return t.type;
  }
  return std::nullopt;
}

std::size_t DataTypeElementSize(TRITONSERVER_DataType datatype) {
  for (const auto& t : kTypes) {
    if (t.type == datatype) return t.size;
  }
  return 0;
}

Result<std::int64_t> ElementCount(const std::vector<std::int64_t>& shape, std::string_view what) {
  std::int64_t count = 1;
  for (std::int64_t dim : shape) {
    if (dim < 0) {
      return InvalidArgument(std::string(what) + ": shape dim " + std::to_string(dim) +
                             " is negative; a request's shape must be concrete (dims >= 0)");
    }
    if (dim != 0 && count > std::numeric_limits<std::int64_t>::max() / dim) {
      return InvalidArgument(std::string(what) + ": shape holds more elements than fit in int64");
    }
    count *= dim;
  }
  return count;
}

Status AppendJsonElements(const nlohmann::json& data, Tensor& tensor) {
  ElementEncoder encoder(tensor);
  return encoder.Walk(data, 0);
}

Result<std::int64_t> EncodedElementCount(const Tensor& tensor) {
  if (tensor.datatype != TRITONSERVER_TYPE_BYTES) {
    const std::size_t size = DataTypeElementSize(tensor.datatype);
    if (size == 0) {
      return InvalidArgument("tensor \"" + tensor.name + "\": datatype " +
                             std::to_string(static_cast<int>(tensor.datatype)) +
                             " is not supported");
    }
    if (tensor.data.size() % size != 0) {
      return Internal("tensor \"" + tensor.name + "\": " + std::to_string(tensor.data.size()) +
                      " bytes is not a whole number of " + DataTypeName(tensor.datatype) +
                      " elements");
    }
    return static_cast<std::int64_t>(tensor.data.size() / size);
  }
  std::int64_t count = 0;
  std::size_t offset = 0;
  while (offset < tensor.data.size()) {
    if (tensor.data.size() - offset < 4) {
      return Internal("tensor \"" + tensor.name + "\": BYTES element " + std::to_string(count) +
                      " has a truncated length prefix");
    }
    const auto len = ReadRaw<std::uint32_t>(tensor.data.data() + offset);
    offset += 4;
    if (tensor.data.size() - offset < len) {
      return Internal("tensor \"" + tensor.name + "\": BYTES element " + std::to_string(count) +
                      " claims " + std::to_string(len) + " bytes but only " +
                      std::to_string(tensor.data.size() - offset) + " remain");
    }
    offset += len;
    ++count;
  }
  return count;
}

Status CheckElementCount(const Tensor& tensor) {
  ASSIGN_OR_RETURN(std::int64_t expected,
                   ElementCount(tensor.shape, "input \"" + tensor.name + "\""));
  ASSIGN_OR_RETURN(std::int64_t found, EncodedElementCount(tensor));
  if (expected != found) {
    std::string shape;
    for (std::size_t i = 0; i < tensor.shape.size(); ++i) {
      shape += (i ? "," : "") + std::to_string(tensor.shape[i]);
    }
    return InvalidArgument("input \"" + tensor.name + "\": shape [" + shape + "] needs " +
                           std::to_string(expected) + " elements but 'data' holds " +
                           std::to_string(found));
  }
  return Status::Ok();
}

Result<nlohmann::json> TensorElementsToJson(const Tensor& tensor) {
  ASSIGN_OR_RETURN(std::int64_t count, EncodedElementCount(tensor));
  json out = json::array();
  const char* p = tensor.data.data();
  if (tensor.datatype == TRITONSERVER_TYPE_BYTES) {
    const char* end = p + tensor.data.size();
    while (p < end) {
      const auto len = ReadRaw<std::uint32_t>(p);
      out.push_back(std::string(p + 4, len));
      p += 4 + len;
    }
    return out;
  }
  const std::size_t size = DataTypeElementSize(tensor.datatype);
  for (std::int64_t i = 0; i < count; ++i, p += size) {
    switch (tensor.datatype) {
      case TRITONSERVER_TYPE_BOOL:
        out.push_back(ReadRaw<std::uint8_t>(p) != 0);
        break;
      case TRITONSERVER_TYPE_UINT8:
        out.push_back(ReadRaw<std::uint8_t>(p));
        break;
      case TRITONSERVER_TYPE_UINT16:
        out.push_back(ReadRaw<std::uint16_t>(p));
        break;
      case TRITONSERVER_TYPE_UINT32:
        out.push_back(ReadRaw<std::uint32_t>(p));
        break;
      case TRITONSERVER_TYPE_UINT64:
        out.push_back(ReadRaw<std::uint64_t>(p));
        break;
      case TRITONSERVER_TYPE_INT8:
        out.push_back(ReadRaw<std::int8_t>(p));
        break;
      case TRITONSERVER_TYPE_INT16:
        out.push_back(ReadRaw<std::int16_t>(p));
        break;
      case TRITONSERVER_TYPE_INT32:
        out.push_back(ReadRaw<std::int32_t>(p));
        break;
      case TRITONSERVER_TYPE_INT64:
        out.push_back(ReadRaw<std::int64_t>(p));
        break;
      case TRITONSERVER_TYPE_FP16:
        out.push_back(Fp16ToFloat(ReadRaw<std::uint16_t>(p)));
        break;
      case TRITONSERVER_TYPE_BF16:
        out.push_back(Bf16ToFloat(ReadRaw<std::uint16_t>(p)));
        break;
      case TRITONSERVER_TYPE_FP32:
        out.push_back(ReadRaw<float>(p));
        break;
      case TRITONSERVER_TYPE_FP64:
        out.push_back(ReadRaw<double>(p));
        break;
      default:
        return Internal("tensor \"" + tensor.name + "\": unsupported datatype");
    }
  }
  return out;
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace inflight::server::http
