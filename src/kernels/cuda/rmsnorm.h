// RMSNorm with an optional fused residual add (Llama family); CUDA twin of kernels/cpu/rmsnorm.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

// All pointers are device memory of `dtype` (fp16 or bf16); rows of `hidden` contiguous elements.
//   residual == nullptr:  out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight
//   residual != nullptr:  residual[t] += x[t] (rounded to dtype);  out[t] = norm(residual[t])
// Math in fp32. out may alias x. weight: [hidden].
cudaError_t RmsNorm(void* out, const void* x, void* residual, const void* weight, DType dtype,
                    std::int64_t num_tokens, std::int64_t hidden, float eps, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
