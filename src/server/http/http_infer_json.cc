#include "server/http/http_infer_json.h"

#include <optional>
#include <set>
#include <utility>

#include "server/http/http_tensor_json.h"

namespace inflight::server::http {
namespace {

using nlohmann::json;

const char* JsonTypeName(const json& value) {
  if (value.is_number_float()) return "number";
  if (value.is_number()) return "integer";
  return value.type_name();
}

Result<Tensor> ParseInput(const json& input, std::size_t index, BinaryInputCursor& binary) {
  const std::string where = "inputs[" + std::to_string(index) + "]";
  if (!input.is_object()) {
    return InvalidArgument(where + " must be an object, got " + std::string(JsonTypeName(input)));
  }
  Tensor tensor;
  auto name = input.find("name");
  if (name == input.end() || !name->is_string()) {
    return InvalidArgument(where + ": 'name' must be a string");
  }
  tensor.name = name->get<std::string>();
  const std::string what = "input \"" + tensor.name + "\"";

  auto datatype = input.find("datatype");
  if (datatype == input.end() || !datatype->is_string()) {
    return InvalidArgument(what + ": 'datatype' must be a string such as \"INT32\" or \"BYTES\"");
  }
  auto parsed_type = ParseDataTypeName(datatype->get<std::string>());
  if (!parsed_type) {
    return InvalidArgument(
        what + ": datatype \"" + datatype->get<std::string>() +
        "\" is not one of: BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, "
        "FP16, FP32, FP64, BF16, BYTES");
  }
  tensor.datatype = *parsed_type;

  auto shape = input.find("shape");
  if (shape == input.end() || !shape->is_array()) {
    return InvalidArgument(what + ": 'shape' must be an array of non-negative integers");
  }
  for (const json& dim : *shape) {
    if (!dim.is_number_integer() || dim.get<std::int64_t>() < 0) {
      return InvalidArgument(what + ": 'shape' must be an array of non-negative integers, got " +
                             DumpJson(*shape));
    }
    tensor.shape.push_back(dim.get<std::int64_t>());
  }

  const json* binary_data_size = nullptr;
  auto parameters = input.find("parameters");
  if (parameters != input.end()) {
    if (!parameters->is_object()) return InvalidArgument(what + ": 'parameters' must be an object");
    if (parameters->contains("shared_memory_region")) {
      return Unsupported(what +
                         ": shared memory inputs are not supported; send 'data' as JSON or "
                         "parameters.binary_data_size with binary data");
    }
    if (auto size = parameters->find("binary_data_size"); size != parameters->end()) {
      binary_data_size = &*size;
    }
  }

  auto data = input.find("data");
  // One source of data per input, as Triton's ValidateInputContentType rules.
  if (data != input.end() && binary_data_size != nullptr) {
    return InvalidArgument(what +
                           ": sets both 'data' and parameters.binary_data_size; an input's "
                           "data is either JSON 'data' or binary data, not both");
  }
  if (binary_data_size != nullptr) {
    ASSIGN_OR_RETURN(std::int64_t size, ParseBinaryDataSize(*binary_data_size, tensor.name));
    ASSIGN_OR_RETURN(std::string_view bytes, binary.Take(tensor.name, size));
    RETURN_IF_ERROR(SetBinaryTensorData(bytes, tensor));
    return tensor;
  }
  if (data == input.end()) {
    return InvalidArgument(what +
                           ": 'data' is missing; give the elements as JSON 'data' or as binary "
                           "data with parameters.binary_data_size");
  }
  RETURN_IF_ERROR(AppendJsonElements(*data, tensor));
  RETURN_IF_ERROR(CheckElementCount(tensor));
  return tensor;
}

// outputs[i]: {"name", "parameters": {"binary_data": bool}}.
Status ParseRequestedOutput(const json& output, std::size_t index, InferRequest& request,
                            BinaryOutputChoice& binary_outputs) {
  auto name = output.is_object() ? output.find("name") : output.end();
  if (!output.is_object() || name == output.end() || !name->is_string()) {
    return InvalidArgument("outputs[" + std::to_string(index) +
                           "] must be an object with a string 'name'");
  }
  const std::string output_name = name->get<std::string>();
  const std::string what = "output \"" + output_name + "\"";
  if (auto parameters = output.find("parameters"); parameters != output.end()) {
    if (!parameters->is_object()) return InvalidArgument(what + ": 'parameters' must be an object");
    if (parameters->contains("classification")) {
      return Unsupported(what + ": classification outputs are not supported; ask for the tensor");
    }
    if (parameters->contains("shared_memory_region")) {
      return Unsupported(what +
                         ": shared memory outputs are not supported; ask for JSON or binary data");
    }
    if (auto binary = parameters->find("binary_data"); binary != parameters->end()) {
      ASSIGN_OR_RETURN(bool is_binary,
                       ParseBoolParameter(*binary, what + ": parameters.binary_data"));
      binary_outputs.Set(output_name, is_binary);
    }
  }
  request.requested_outputs.push_back(output_name);
  return Status::Ok();
}

// The byte offset where `text` opens its (limit + 1)th nested array or object, outside strings;
// nullopt when it never nests that deep. Only brackets and strings matter: malformed text is left
// to the parser.
std::optional<std::size_t> FindExcessNesting(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace

Result<nlohmann::json> ParseJsonBody(std::string_view body) {
  // NOTE: nlohmann's parser and destructor are iterative, but copying and dumping a value recurse
  // once per level: a body of a few MB of '[' would overflow the stack of whatever copies it (the
  // generate decoder copies unknown fields, error messages dump values). So nesting is bounded
  // before parsing.
  if (auto deep = FindExcessNesting(body, kMaxBodyNesting)) {
    return InvalidArgument("request body has arrays or objects nested deeper than " +
                           std::to_string(kMaxBodyNesting) + " levels (at byte " +
                           std::to_string(*deep) + ")");
  }
  try {
    return json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    // NOTE: not only parse_error: a number whose exponent overflows ("1e854775807") is
    // out_of_range 406, thrown from inside the parser too.
    return InvalidArgument(std::string("malformed JSON in request body: ") + e.what());
  }
}

Status ParseParameters(const nlohmann::json& object, std::string_view where,
                       std::map<std::string, ParameterValue>& parameters) {
  if (!object.is_object()) {
    return InvalidArgument(std::string(where) + " must be an object, got " + JsonTypeName(object));
  }
  for (const auto& [key, value] : object.items()) {
    if (value.is_string()) {
      parameters[key] = value.get<std::string>();
    } else if (value.is_boolean()) {
      parameters[key] = value.get<bool>();
    } else if (value.is_number_unsigned()) {
      if (value.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return InvalidArgument(std::string(where) + ": parameter \"" + key +
                               "\" = " + DumpJson(value) + " does not fit in int64");
      }
      parameters[key] = value.get<std::int64_t>();
    } else if (value.is_number_integer()) {
      parameters[key] = value.get<std::int64_t>();
    } else if (value.is_number_float()) {
      parameters[key] = value.get<double>();
    } else {
      return InvalidArgument(std::string(where) + ": parameter \"" + key + "\" is " +
                             JsonTypeName(value) +
                             "; a parameter must be a string, integer, boolean or number");
    }
  }
  return Status::Ok();
}

nlohmann::json ParametersToJson(const std::map<std::string, ParameterValue>& parameters) {
  json out = json::object();
  // NOTE: no structured binding: clang before 16 (clang-tidy's) cannot capture one.
  for (const auto& entry : parameters) {
    std::visit([&out, &entry](const auto& v) { out[entry.first] = v; }, entry.second);
  }
  return out;
}

Result<ParsedInferRequest> ParseInferRequest(const nlohmann::json& body, const InferBody& parts,
                                             const std::string& model_name,
                                             std::int64_t model_version) {
  if (!body.is_object()) {
    return InvalidArgument("inference request body must be a JSON object, got " +
                           std::string(JsonTypeName(body)));
  }
  ParsedInferRequest parsed;
  InferRequest& request = parsed.request;
  request.model_name = model_name;
  request.model_version = model_version;

  if (auto id = body.find("id"); id != body.end()) {
    if (!id->is_string())
      return InvalidArgument("'id' must be a string, got " + std::string(JsonTypeName(*id)));
    request.id = id->get<std::string>();
  }
  if (auto parameters = body.find("parameters"); parameters != body.end()) {
    RETURN_IF_ERROR(ParseParameters(*parameters, "'parameters'", request.parameters));
    // The frontend's own parameter, as in Triton's ParseJsonTritonParams: it picks the default
    // output encoding and is not passed on to the model.
    if (auto all_binary = parameters->find("binary_data_output"); all_binary != parameters->end()) {
      ASSIGN_OR_RETURN(bool binary,
                       ParseBoolParameter(*all_binary, "parameters.binary_data_output"));
      parsed.binary_outputs.SetDefault(binary);
      request.parameters.erase("binary_data_output");
    }
  }

  auto inputs = body.find("inputs");
  if (inputs == body.end() || !inputs->is_array()) {
    return InvalidArgument("'inputs' must be an array of input tensors");
  }
  std::set<std::string> seen;
  BinaryInputCursor binary(parts);
  for (std::size_t i = 0; i < inputs->size(); ++i) {
    ASSIGN_OR_RETURN(Tensor tensor, ParseInput((*inputs)[i], i, binary));
    if (!seen.insert(tensor.name).second) {
      return InvalidArgument("input \"" + tensor.name + "\" is given more than once");
    }
    request.inputs.push_back(std::move(tensor));
  }
  RETURN_IF_ERROR(binary.CheckAllUsed());

  if (auto outputs = body.find("outputs"); outputs != body.end()) {
    if (!outputs->is_array())
      return InvalidArgument("'outputs' must be an array of {\"name\": ...} objects");
    for (std::size_t i = 0; i < outputs->size(); ++i) {
      RETURN_IF_ERROR(ParseRequestedOutput((*outputs)[i], i, request, parsed.binary_outputs));
    }
  }
  return parsed;
}

Result<nlohmann::json> InferResponseToJson(const InferResponse& response,
                                           const BinaryOutputChoice& binary_outputs,
                                           std::string& binary) {
  json out = json::object();
  out["model_name"] = response.model_name;
  out["model_version"] = std::to_string(response.model_version);
  if (!response.id.empty()) out["id"] = response.id;
  if (!response.parameters.empty()) out["parameters"] = ParametersToJson(response.parameters);
  json outputs = json::array();
  for (const Tensor& tensor : response.outputs) {
    if (binary_outputs.IsBinary(tensor.name)) {
      // Checked as the JSON path checks it (a BYTES tensor's length prefixes must hold), so that
      // both encodings refuse the same malformed model outputs.
      RETURN_IF_ERROR(EncodedElementCount(tensor).status());
      outputs.push_back({{"name", tensor.name},
                         {"datatype", DataTypeName(tensor.datatype)},
                         {"shape", tensor.shape},
                         {"parameters", {{"binary_data_size", tensor.data.size()}}}});
      binary.append(tensor.data.data(), tensor.data.size());
      continue;
    }
    ASSIGN_OR_RETURN(json data, TensorElementsToJson(tensor));
    outputs.push_back({{"name", tensor.name},
                       {"datatype", DataTypeName(tensor.datatype)},
                       {"shape", tensor.shape},
                       {"data", std::move(data)}});
  }
  out["outputs"] = std::move(outputs);
  return out;
}

nlohmann::json ModelMetadataToJson(const ModelMetadata& metadata) {
  auto tensors = [](const std::vector<TensorMetadata>& list) {
    json out = json::array();
    for (const TensorMetadata& t : list) {
      out.push_back({{"name", t.name}, {"datatype", DataTypeName(t.datatype)}, {"shape", t.shape}});
    }
    return out;
  };
  return {{"name", metadata.name},
          {"versions", metadata.versions},
          {"platform", metadata.platform},
          {"inputs", tensors(metadata.inputs)},
          {"outputs", tensors(metadata.outputs)}};
}

}  // namespace inflight::server::http
