// Turns one executor Response for one batch row into the output tensors of NVIDIA's tensorrt_llm
// model. Pure: no Triton calls.
//
// Shapes (with the leading batch dimension 1 when the model batches):
//   output_ids [1, beams, max_len] (rows padded with -1)   sequence_length [1, beams]
//   cum_log_probs [1, beams]   output_log_probs [1, beams, max_gen_len]
//   context_logits [1, prompt_len, vocab]   generation_logits [1, beams, gen_len, vocab]
//   batch_index, sequence_index, kv_cache_* [1, 1] INT32   *_time_ns [1, 1] INT64
#pragma once

#include <set>
#include <string>
#include <vector>

#include "backend/host_tensor.h"
#include "inflight/executor.h"

namespace inflight::backend {

struct RowOutputContext {
  bool batched = true;  // prefix the batch dimension 1
  std::int32_t batch_index = 0;
  bool report_batch_index = false;  // only for requests of batch size > 1
  bool return_perf_metrics = false;
  TRITONSERVER_DataType logits_dtype = TRITONSERVER_TYPE_FP32;  // FP32 or FP16
};

// `requested` holds the output names the client asked for (Triton gives all the model's outputs
// when the client names none).
std::vector<HostTensor> BuildOutputs(const ResponseResult& result, const RowOutputContext& ctx,
                                     const std::set<std::string>& requested);

}  // namespace inflight::backend
