// The KServe v2 inference request and response as JSON (POST /v2/models/<m>/infer), and the pieces
// the generate extension shares with it (request parameters, model metadata).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "server/http/http_binary_tensors.h"
#include "server/server_api.h"

namespace inflight::server::http {

// Arrays and objects nested deeper than this are refused: a tensor's data may nest 64 levels
// (http_tensor_json.cc), inside the request's own few levels.
inline constexpr int kMaxBodyNesting = 100;

// Parses a request body into JSON; malformed text is kInvalidArgument with the parser's position,
// and so is nesting deeper than kMaxBodyNesting.
Result<nlohmann::json> ParseJsonBody(std::string_view body);

// {"k": string | integer | boolean | number} → parameters; any other value type is kInvalidArgument
// naming the key.
Status ParseParameters(const nlohmann::json& object, std::string_view where,
                       std::map<std::string, ParameterValue>& parameters);
nlohmann::json ParametersToJson(const std::map<std::string, ParameterValue>& parameters);

struct ParsedInferRequest {
  InferRequest request;
  BinaryOutputChoice binary_outputs;  // how to send the outputs back
};

// {"id", "parameters", "inputs": [{"name", "shape", "datatype", "data", "parameters"}], "outputs":
// [{"name", "parameters"}]}, `body` being the parsed parts.json. An input with
// parameters.binary_data_size takes its data from parts.binary (http_binary_tensors.h); every byte
// there must belong to an input.
Result<ParsedInferRequest> ParseInferRequest(const nlohmann::json& body, const InferBody& parts,
                                             const std::string& model_name,
                                             std::int64_t model_version);

// {"model_name", "model_version", "id", "parameters", "outputs": [{"name", "datatype", "shape",
// "data"}]}. Outputs `binary_outputs` names binary carry "parameters": {"binary_data_size": N}
// instead of "data", and their bytes are appended to `binary` in output order.
Result<nlohmann::json> InferResponseToJson(const InferResponse& response,
                                           const BinaryOutputChoice& binary_outputs,
                                           std::string& binary);

// {"name", "versions", "platform", "inputs": [{"name", "datatype", "shape"}], "outputs": [...]}
nlohmann::json ModelMetadataToJson(const ModelMetadata& metadata);

}  // namespace inflight::server::http
