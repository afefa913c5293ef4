// Copies tensors between Triton requests/responses and HostTensor.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "backend/host_tensor.h"
#include "inflight/status.h"
#include "triton/core/tritonbackend.h"

namespace inflight::backend {

// Every input of the request, gathered into contiguous host buffers.
Result<TensorMap> ReadInputs(TRITONBACKEND_Request* request);

// The names of the outputs the request asked for.
Result<std::set<std::string>> RequestedOutputs(TRITONBACKEND_Request* request);

// Adds the tensors as outputs of `response` (CPU memory).
Status WriteOutputs(TRITONBACKEND_Response* response, const std::vector<HostTensor>& tensors);

// The request's id, or "" when it has none.
std::string RequestIdOf(TRITONBACKEND_Request* request);

}  // namespace inflight::backend
