// LayerNorm with bias and an optional fused residual add (GPT-2); CUDA twin of
// kernels/cpu/layernorm.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

// All pointers are device memory of `dtype` (fp16 or bf16); rows of `hidden` contiguous elements.
//   residual == nullptr:  out[t] = (x[t] - mean) / sqrt(var + eps) * weight + bias
//   residual != nullptr:  residual[t] += x[t] (rounded to dtype);  out[t] = norm(residual[t])
// var is the population variance (torch.nn.LayerNorm); math in fp32 with a centred second pass.
// out may alias x. weight: [hidden]; bias: [hidden] or nullptr.
cudaError_t LayerNorm(void* out, const void* x, void* residual, const void* weight,
                      const void* bias, DType dtype, std::int64_t num_tokens, std::int64_t hidden,
                      float eps, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
