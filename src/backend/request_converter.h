// Turns the input tensors of one Triton request (NVIDIA's tensorrt_llm tensor names) into executor
// Requests, one per batch row. Pure: no Triton calls, so it is unit-tested directly.
#pragma once

#include <vector>

#include "backend/host_tensor.h"
#include "inflight/executor.h"

namespace inflight::backend {

struct ModelSettings {
  bool decoupled = false;
  std::int32_t max_batch_size = 0;       // > 0: inputs carry a leading batch dimension
  bool exclude_input_in_output = false;  // model default; the request's input overrides it
};

struct ConvertedRequest {
  std::vector<Request> rows;  // one executor request per batch row
  bool streaming = false;
  bool stop = false;  // a `stop` request: cancel the request with the same id
  bool return_perf_metrics = false;
};

Result<ConvertedRequest> ConvertRequest(const TensorMap& inputs, const ModelSettings& settings);

}  // namespace inflight::backend
