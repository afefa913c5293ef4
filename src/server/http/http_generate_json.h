// Triton's generate extension (POST /v2/models/<m>/generate and /generate_stream): a flat JSON
// object of input name → value in, a flat JSON object of output name → value out.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "server/server_api.h"

namespace inflight::server::http {

// Builds an inference request from a generate body. A key naming one of the model's inputs becomes
// a tensor with that input's datatype: a scalar has shape [1], a list [n] (nested lists [n, m,
// ...]); leading 1s pad it to the input's rank, and `batching` (max_batch_size > 0) prepends the
// batch dim 1. "parameters" (an object) and every other key become request parameters, which must
// be strings, numbers or booleans. A string "id" that is not an input is the request id.
Result<InferRequest> ParseGenerateRequest(const nlohmann::json& body, const ModelMetadata& metadata,
                                          bool batching, std::int64_t model_version);

// {"model_name", "model_version", "id", <output>: value, ...}: one-element outputs as a scalar,
// others as a flat list; BYTES as strings.
Result<nlohmann::json> GenerateResponseToJson(const InferResponse& response);

}  // namespace inflight::server::http
