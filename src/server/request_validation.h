// Checks an InferRequest against the model configuration, with Triton's messages, and turns it
// into the request a backend reads.
#pragma once

#include <memory>

#include "model_config.pb.h"
#include "server/inference_request.h"
#include "server/server_api.h"

namespace inflight::server {

// Returns the batch size (the first dim when max_batch_size > 0, else 1). Errors are
// kInvalidArgument naming the tensor.
Result<int64_t> ValidateInferRequest(const inference::ModelConfig& config,
                                     const InferRequest& request);

// Moves the tensors of `request` into a backend request. Request parameters that Triton treats as
// request properties (sequence_id, sequence_start, sequence_end, timeout, priority) become the
// correlation id, flags and timeout instead of parameters.
std::unique_ptr<InferenceRequest> BuildInferenceRequest(Model* model, InferRequest request,
                                                        std::shared_ptr<ResponseChannel> channel,
                                                        int64_t batch_size);

// "TYPE_FP32" for TRITONSERVER_TYPE_FP32 (the config spelling Triton's messages use).
std::string ConfigTypeName(TRITONSERVER_DataType datatype);
std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace inflight::server
