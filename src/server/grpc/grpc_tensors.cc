#include "server/grpc/grpc_tensors.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <type_traits>

namespace inflight::server::grpc_frontend {
namespace {

using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;

constexpr const char* kDataTypeNames =
    "BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BF16, BYTES";

std::string ShapeText(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

Result<std::int64_t> ElementCount(const Tensor& tensor, const std::string& what) {
  std::int64_t count = 1;
  for (std::int64_t dim : tensor.shape) {
    if (dim < 0) {
      return InvalidArgument(what + ": shape " + ShapeText(tensor.shape) +
                             " has a negative dim; a request's shape must be concrete");
    }
    if (dim != 0 && count > std::numeric_limits<std::int64_t>::max() / dim) {
      return InvalidArgument(what + ": shape " + ShapeText(tensor.shape) +
                             " holds more elements than fit in int64");
    }
    count *= dim;
  }
  return count;
}

// Number of length-prefixed elements in a BYTES blob; an error names the element that overruns.
Result<std::int64_t> CountBytesElements(const std::string& what, const char* data,
                                        std::size_t size) {
  std::int64_t count = 0;
  std::size_t offset = 0;
  while (offset < size) {
    if (size - offset < 4) {
      return InvalidArgument(what + ": BYTES element " + std::to_string(count) +
                             " has a truncated 4-byte length prefix (" +
                             std::to_string(size - offset) + " bytes left)");
    }
    std::uint32_t len = 0;
    std::memcpy(&len, data + offset, 4);
    offset += 4;
    if (size - offset < len) {
      return InvalidArgument(what + ": BYTES element " + std::to_string(count) + " claims " +
                             std::to_string(len) + " bytes but only " +
                             std::to_string(size - offset) + " remain");
    }
    offset += len;
    ++count;
  }
  return count;
}

// The raw blob must hold exactly the shape's elements.
Status CheckRawSize(const Tensor& tensor, const std::string& what) {
  ASSIGN_OR_RETURN(std::int64_t expected, ElementCount(tensor, what));
  if (tensor.datatype == TRITONSERVER_TYPE_BYTES) {
    ASSIGN_OR_RETURN(std::int64_t found,
                     CountBytesElements(what, tensor.data.data(), tensor.data.size()));
    if (found != expected) {
      return InvalidArgument(
          what + ": shape " + ShapeText(tensor.shape) + " needs " + std::to_string(expected) +
          " BYTES elements but its raw_input_contents holds " + std::to_string(found));
    }
    return Status::Ok();
  }
  const std::uint64_t element_size = TRITONSERVER_DataTypeByteSize(tensor.datatype);
  const std::uint64_t want = static_cast<std::uint64_t>(expected) * element_size;
  if (tensor.data.size() != want) {
    return InvalidArgument(what + ": shape " + ShapeText(tensor.shape) + " of " +
                           TRITONSERVER_DataTypeString(tensor.datatype) + " needs " +
                           std::to_string(want) + " bytes but its raw_input_contents holds " +
                           std::to_string(tensor.data.size()));
  }
  return Status::Ok();
}

template <typename Wire, typename Elem>
Status AppendTyped(const google::protobuf::RepeatedField<Wire>& values, Tensor& tensor,
                   const std::string& what, const char* field) {
  for (int i = 0; i < values.size(); ++i) {
    const Wire v = values.Get(i);
    if constexpr (std::is_integral_v<Elem> && !std::is_same_v<Elem, bool> &&
                  sizeof(Elem) < sizeof(Wire)) {
      if (v < static_cast<Wire>(std::numeric_limits<Elem>::min()) ||
          v > static_cast<Wire>(std::numeric_limits<Elem>::max())) {
        return InvalidArgument(what + ": contents." + field + "[" + std::to_string(i) +
                               "] = " + std::to_string(v) + " does not fit in " +
                               TRITONSERVER_DataTypeString(tensor.datatype));
      }
    }
    const Elem e = static_cast<Elem>(v);
    const char* bytes = reinterpret_cast<const char*>(&e);
    tensor.data.insert(tensor.data.end(), bytes, bytes + sizeof(Elem));
  }
  return Status::Ok();
}

// The typed field that must carry a datatype's elements (Triton's rule), and the element count in
// it; every other field must be empty.
Status AppendContents(const InferTensorContents& c, Tensor& tensor, const std::string& what) {
  struct Field {
    const char* name;
    int size;
  };
  const Field fields[] = {
      {"bool_contents", c.bool_contents_size()},     {"int_contents", c.int_contents_size()},
      {"int64_contents", c.int64_contents_size()},   {"uint_contents", c.uint_contents_size()},
      {"uint64_contents", c.uint64_contents_size()}, {"fp32_contents", c.fp32_contents_size()},
      {"fp64_contents", c.fp64_contents_size()},     {"bytes_contents", c.bytes_contents_size()},
  };
  const char* wanted = nullptr;
  switch (tensor.datatype) {
    case TRITONSERVER_TYPE_BOOL:
      wanted = "bool_contents";
      break;
    case TRITONSERVER_TYPE_INT8:
    case TRITONSERVER_TYPE_INT16:
    case TRITONSERVER_TYPE_INT32:
      wanted = "int_contents";
      break;
    case TRITONSERVER_TYPE_INT64:
      wanted = "int64_contents";
      break;
    case TRITONSERVER_TYPE_UINT8:
    case TRITONSERVER_TYPE_UINT16:
    case TRITONSERVER_TYPE_UINT32:
      wanted = "uint_contents";
      break;
    case TRITONSERVER_TYPE_UINT64:
      wanted = "uint64_contents";
      break;
    case TRITONSERVER_TYPE_FP32:
      wanted = "fp32_contents";
      break;
    case TRITONSERVER_TYPE_FP64:
      wanted = "fp64_contents";
      break;
    case TRITONSERVER_TYPE_BYTES:
      wanted = "bytes_contents";
      break;
    default:
      return InvalidArgument(what + ": " + TRITONSERVER_DataTypeString(tensor.datatype) +
                             " has no typed contents field; send it in raw_input_contents");
  }
  for (const Field& f : fields) {
    if (f.size > 0 && std::strcmp(f.name, wanted) != 0) {
      return InvalidArgument(what + ": datatype " + TRITONSERVER_DataTypeString(tensor.datatype) +
                             " takes its elements in contents." + wanted + ", not contents." +
                             f.name);
    }
  }
  switch (tensor.datatype) {
    case TRITONSERVER_TYPE_BOOL:
      return AppendTyped<bool, bool>(c.bool_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_INT8:
      return AppendTyped<std::int32_t, std::int8_t>(c.int_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_INT16:
      return AppendTyped<std::int32_t, std::int16_t>(c.int_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_INT32:
      return AppendTyped<std::int32_t, std::int32_t>(c.int_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_INT64:
      return AppendTyped<std::int64_t, std::int64_t>(c.int64_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_UINT8:
      return AppendTyped<std::uint32_t, std::uint8_t>(c.uint_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_UINT16:
      return AppendTyped<std::uint32_t, std::uint16_t>(c.uint_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_UINT32:
      return AppendTyped<std::uint32_t, std::uint32_t>(c.uint_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_UINT64:
      return AppendTyped<std::uint64_t, std::uint64_t>(c.uint64_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_FP32:
      return AppendTyped<float, float>(c.fp32_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_FP64:
      return AppendTyped<double, double>(c.fp64_contents(), tensor, what, wanted);
    case TRITONSERVER_TYPE_BYTES:
      for (const std::string& element : c.bytes_contents()) {
        if (element.size() > std::numeric_limits<std::uint32_t>::max()) {
          return InvalidArgument(what + ": a BYTES element is larger than 4 GiB");
        }
        const auto len = static_cast<std::uint32_t>(element.size());
        const char* prefix = reinterpret_cast<const char*>(&len);
        tensor.data.insert(tensor.data.end(), prefix, prefix + 4);
        tensor.data.insert(tensor.data.end(), element.begin(), element.end());
      }
      return Status::Ok();
    default:
      return Status::Ok();  // refused above
  }
}

// Input tensor parameters: tritonclient.grpc sets them only for shared memory, which is not served.
Status CheckInputParameters(const ModelInferRequest::InferInputTensor& input,
                            const std::string& what) {
  for (const auto& [key, value] : input.parameters()) {
    if (key.rfind("shared_memory_", 0) == 0) {
      return Unsupported(what + ": parameter '" + key +
                         "' asks for shared memory, which inflight-server does not support; "
                         "send the tensor in raw_input_contents");
    }
    return InvalidArgument(what + ": parameter '" + key +
                           "' is not supported (input tensors take no parameters here)");
  }
  return Status::Ok();
}

Result<std::int64_t> ContentsCount(const Tensor& tensor, const std::string& what) {
  if (tensor.datatype == TRITONSERVER_TYPE_BYTES) {
    return CountBytesElements(what, tensor.data.data(), tensor.data.size());
  }
  return static_cast<std::int64_t>(tensor.data.size() /
                                   TRITONSERVER_DataTypeByteSize(tensor.datatype));
}

}  // namespace

Result<std::int64_t> ParseModelVersion(std::string_view field, const std::string& text) {
  if (text.empty()) return std::int64_t{-1};
  std::int64_t version = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (ec != std::errc() || end != text.data() + text.size() || version < 0) {
    return InvalidArgument(std::string(field) + " \"" + text +
                           "\" is not a non-negative integer (or empty for the latest version)");
  }
  return version;
}

Status FromInferParameters(const google::protobuf::Map<std::string, InferParameter>& in,
                           std::string_view where, std::map<std::string, ParameterValue>& out) {
  for (const auto& [key, value] : in) {
    switch (value.parameter_choice_case()) {
      case InferParameter::kBoolParam:
        out[key] = value.bool_param();
        break;
      case InferParameter::kInt64Param:
        out[key] = static_cast<std::int64_t>(value.int64_param());
        break;
      case InferParameter::kStringParam:
        out[key] = value.string_param();
        break;
      case InferParameter::kDoubleParam:
        out[key] = value.double_param();
        break;
      case InferParameter::kUint64Param:
        if (value.uint64_param() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
          return InvalidArgument(std::string(where) + " parameter '" + key + "': uint64_param " +
                                 std::to_string(value.uint64_param()) +
                                 " is larger than the largest int64");
        }
        out[key] = static_cast<std::int64_t>(value.uint64_param());
        break;
      case InferParameter::PARAMETER_CHOICE_NOT_SET:
        return InvalidArgument(std::string(where) + " parameter '" + key +
                               "' has no value (set one of bool_param, int64_param, "
                               "string_param, double_param, uint64_param)");
    }
  }
  return Status::Ok();
}

void ToInferParameters(const std::map<std::string, ParameterValue>& in,
                       google::protobuf::Map<std::string, InferParameter>& out) {
  for (const auto& [key, value] : in) {
    InferParameter& p = out[key];
    if (const auto* s = std::get_if<std::string>(&value)) p.set_string_param(*s);
    if (const auto* i = std::get_if<std::int64_t>(&value)) p.set_int64_param(*i);
    if (const auto* b = std::get_if<bool>(&value)) p.set_bool_param(*b);
    if (const auto* d = std::get_if<double>(&value)) p.set_double_param(*d);
  }
}

Result<InferRequest> FromModelInferRequest(const ModelInferRequest& request,
                                           bool* enable_empty_final_response) {
  InferRequest out;
  out.model_name = request.model_name();
  if (out.model_name.empty()) return InvalidArgument("model_name is empty: name the model to run");
  ASSIGN_OR_RETURN(out.model_version, ParseModelVersion("model_version", request.model_version()));
  out.id = request.id();
  RETURN_IF_ERROR(FromInferParameters(request.parameters(), "request", out.parameters));
  if (auto it = out.parameters.find(kEnableEmptyFinalResponse); it != out.parameters.end()) {
    const bool* on = std::get_if<bool>(&it->second);
    if (on == nullptr) {
      return InvalidArgument(std::string("request parameter '") + kEnableEmptyFinalResponse +
                             "' must be a bool_param");
    }
    if (enable_empty_final_response != nullptr) *enable_empty_final_response = *on;
    out.parameters.erase(it);
  }

  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return InvalidArgument("raw_input_contents has " +
                           std::to_string(request.raw_input_contents_size()) +
                           " entries but inputs has " + std::to_string(request.inputs_size()) +
                           "; send one raw_input_contents entry per input, in order");
  }
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    const std::string what = "inputs[" + std::to_string(i) + "] \"" + input.name() + "\"";
    if (input.name().empty())
      return InvalidArgument("inputs[" + std::to_string(i) + "]: empty name");
    RETURN_IF_ERROR(CheckInputParameters(input, what));
    Tensor tensor;
    tensor.name = input.name();
    tensor.datatype = TRITONSERVER_StringToDataType(input.datatype().c_str());
    if (tensor.datatype == TRITONSERVER_TYPE_INVALID) {
      return InvalidArgument(what + ": datatype \"" + input.datatype() +
                             "\" is not one of: " + kDataTypeNames);
    }
    tensor.shape.assign(input.shape().begin(), input.shape().end());
    const bool has_contents = input.has_contents() && input.contents().ByteSizeLong() > 0;
    if (raw) {
      if (has_contents) {
        return InvalidArgument(what + ": has both contents and raw_input_contents; send one");
      }
      const std::string& blob = request.raw_input_contents(i);
      tensor.data.assign(blob.begin(), blob.end());
      RETURN_IF_ERROR(CheckRawSize(tensor, what));
    } else {
      RETURN_IF_ERROR(AppendContents(input.contents(), tensor, what));
      ASSIGN_OR_RETURN(std::int64_t expected, ElementCount(tensor, what));
      ASSIGN_OR_RETURN(std::int64_t found, ContentsCount(tensor, what));
      if (expected != found) {
        return InvalidArgument(what + ": shape " + ShapeText(tensor.shape) + " needs " +
                               std::to_string(expected) + " elements but its contents hold " +
                               std::to_string(found));
      }
    }
    out.inputs.push_back(std::move(tensor));
  }
  for (int i = 0; i < request.outputs_size(); ++i) {
    const auto& output = request.outputs(i);
    if (output.name().empty()) {
      return InvalidArgument("outputs[" + std::to_string(i) + "]: empty name");
    }
    for (const auto& [key, value] : output.parameters()) {
      return Unsupported("outputs[" + std::to_string(i) + "] \"" + output.name() +
                         "\": parameter '" + key +
                         "' is not supported (classification and shared-memory outputs are not "
                         "served; request the output without parameters)");
    }
    out.requested_outputs.push_back(output.name());
  }
  return out;
}

Status ToModelInferResponse(InferResponse& response, inference::ModelInferResponse& out) {
  out.set_model_name(response.model_name);
  out.set_model_version(std::to_string(response.model_version));
  out.set_id(response.id);
  ToInferParameters(response.parameters, *out.mutable_parameters());
  for (Tensor& tensor : response.outputs) {
    auto* o = out.add_outputs();
    o->set_name(tensor.name);
    o->set_datatype(TRITONSERVER_DataTypeString(tensor.datatype));
    for (std::int64_t dim : tensor.shape) o->add_shape(dim);
    out.add_raw_output_contents(std::string(tensor.data.begin(), tensor.data.end()));
    tensor.data.clear();
  }
  return Status::Ok();
}

}  // namespace inflight::server::grpc_frontend
