#include "server/http/http_generate_json.h"

#include <utility>

#include "server/http/http_infer_json.h"
#include "server/http/http_tensor_json.h"

namespace inflight::server::http {
namespace {

using nlohmann::json;

// Shape of a (possibly nested) JSON list, read along the first element of each level;
// rectangularity is checked afterwards by comparing the element count.
std::vector<std::int64_t> NestedShape(const json& value) {
  std::vector<std::int64_t> shape;
  const json* node = &value;
  while (node->is_array() && shape.size() < 64) {
    shape.push_back(static_cast<std::int64_t>(node->size()));
    if (node->empty()) break;
    node = &(*node)[0];
  }
  return shape;
}

Result<Tensor> ValueToTensor(const std::string& name, const json& value,
                             const TensorMetadata& input, bool batching) {
  Tensor tensor;
  tensor.name = name;
  tensor.datatype = input.datatype;
  tensor.shape = NestedShape(value);
  const std::size_t rank = input.shape.size() - ((batching && !input.shape.empty()) ? 1 : 0);
  // A value one level deeper than the model's dims already carries the batch dimension (a batch of
  // several rows, e.g. input_ids [[...], [...]]); anything else is one row.
  const bool has_batch_dim = batching && tensor.shape.size() == rank + 1;
  if (!has_batch_dim) {
    while (tensor.shape.size() < rank) tensor.shape.insert(tensor.shape.begin(), 1);
    if (tensor.shape.empty()) tensor.shape.push_back(1);
    if (batching) tensor.shape.insert(tensor.shape.begin(), 1);
  }
  RETURN_IF_ERROR(AppendJsonElements(value, tensor));
  ASSIGN_OR_RETURN(std::int64_t expected, ElementCount(tensor.shape, "input \"" + name + "\""));
  ASSIGN_OR_RETURN(std::int64_t found, EncodedElementCount(tensor));
  if (expected != found) {
    return InvalidArgument("input \"" + name +
                           "\": nested lists must be rectangular (every inner list the "
                           "same length); got " +
                           std::to_string(found) + " elements for a shape needing " +
                           std::to_string(expected));
  }
  return tensor;
}

}  // namespace

Result<InferRequest> ParseGenerateRequest(const nlohmann::json& body, const ModelMetadata& metadata,
                                          bool batching, std::int64_t model_version) {
  if (!body.is_object()) {
    return InvalidArgument(
        "generate request body must be a JSON object of input name to value, got " +
        std::string(body.type_name()));
  }
  InferRequest request;
  request.model_name = metadata.name;
  request.model_version = model_version;
  for (const auto& [key, value] : body.items()) {
    const TensorMetadata* input = nullptr;
    for (const TensorMetadata& candidate : metadata.inputs) {
      if (candidate.name == key) input = &candidate;
    }
    if (input != nullptr) {
      ASSIGN_OR_RETURN(Tensor tensor, ValueToTensor(key, value, *input, batching));
      request.inputs.push_back(std::move(tensor));
    } else if (key == "parameters") {
      RETURN_IF_ERROR(ParseParameters(value, "'parameters'", request.parameters));
    } else if (key == "id" && value.is_string()) {
      request.id = value.get<std::string>();
    } else {
      // Triton's generate extension passes a key that names no input as a request parameter.
      RETURN_IF_ERROR(ParseParameters(json{{key, value}},
                                      "generate request field \"" + key +
                                          "\" (not an input of model \"" + metadata.name + "\")",
                                      request.parameters));
    }
  }
  return request;
}

Result<nlohmann::json> GenerateResponseToJson(const InferResponse& response) {
  json out = json::object();
  out["model_name"] = response.model_name;
  out["model_version"] = std::to_string(response.model_version);
  if (!response.id.empty()) out["id"] = response.id;
  // Response parameters sit beside the outputs, as tritonserver's generate answers show them (the
  // ensemble's sequence_id / sequence_start / sequence_end).
  const json parameters = ParametersToJson(response.parameters);
  for (const auto& [key, value] : parameters.items()) out[key] = value;
  for (const Tensor& tensor : response.outputs) {
    ASSIGN_OR_RETURN(json data, TensorElementsToJson(tensor));
    if (data.size() == 1) {
      out[tensor.name] = std::move(data[0]);
    } else {
      out[tensor.name] = std::move(data);
    }
  }
  return out;
}

}  // namespace inflight::server::http
