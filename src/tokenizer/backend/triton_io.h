// Conversions between Triton's request/response C API and host tensors. Nothing here knows what the
// tensors mean.
#pragma once

#include <string>
#include <vector>

#include "backend/triton_error.h"
#include "common/status.h"
#include "tokenizer/host_tensor.h"
#include "triton/core/tritonbackend.h"

namespace inflight::tokenizer::backend {

// Status <-> TRITONSERVER_Error: shared with the LLM backend (backend/triton_error.h).
using ::inflight::backend::FromTritonError;
using ::inflight::backend::ToTritonError;

// Every input of the request, copied to the host. INT32, FP32 and BYTES inputs are accepted;
// another data type is InvalidArgument naming the input, its type and the accepted ones.
Result<std::vector<HostTensor>> ReadInputs(TRITONBACKEND_Request* request);

// The output names the request asks for (Triton lists all of the model's outputs when the client
// names none).
Result<std::vector<std::string>> RequestedOutputs(TRITONBACKEND_Request* request);

// Adds each tensor to the response as an output in CPU memory.
Status WriteOutputs(TRITONBACKEND_Response* response, const std::vector<HostTensor>& outputs);

}  // namespace inflight::tokenizer::backend
