// ModelInferRequest / ModelInferResponse (Triton's gRPC messages) <-> the server core's
// InferRequest and InferResponse. Tensors arrive either as raw_input_contents (what
// tritonclient.grpc sends: one little-endian blob per input, BYTES elements with 4-byte length
// prefixes) or in the typed InferTensorContents fields; responses always carry raw_output_contents.
// Errors name the field, the tensor and the value received.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"
#include "grpc_service.pb.h"
#include "server/server_api.h"

namespace inflight::server::grpc_frontend {

// The request parameter a ModelStreamInfer client sets to receive a flag-only final response.
inline constexpr const char* kEnableEmptyFinalResponse = "triton_enable_empty_final_response";
// The response parameter that marks a request's last response on a stream.
inline constexpr const char* kFinalResponse = "triton_final_response";

// "" → -1 (the latest ready version); else a non-negative decimal. `field` names the message field
// in the error ("model_version", "version").
Result<std::int64_t> ParseModelVersion(std::string_view field, const std::string& text);

// Converts a ModelInferRequest (its raw contents are copied once, into the core's tensors).
// `enable_empty_final_response` (may be null) receives the stream-only parameter, which is not
// passed on to the model.
Result<InferRequest> FromModelInferRequest(const inference::ModelInferRequest& request,
                                           bool* enable_empty_final_response);

// Fills `out` from a response of the core (its outputs, moved, as raw_output_contents).
Status ToModelInferResponse(InferResponse& response, inference::ModelInferResponse& out);

// Parameters of a request or response, in both directions.
Status FromInferParameters(const google::protobuf::Map<std::string, inference::InferParameter>& in,
                           std::string_view where, std::map<std::string, ParameterValue>& out);
void ToInferParameters(const std::map<std::string, ParameterValue>& in,
                       google::protobuf::Map<std::string, inference::InferParameter>& out);

}  // namespace inflight::server::grpc_frontend
