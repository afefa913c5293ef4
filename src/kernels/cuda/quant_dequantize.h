// A quantized linear's weight widened to the activation dtype: the fallback path of
// quant_linear.h dequantizes into a scratch and runs the float GEMM on it. CUDA twin of
// kernels/cpu/dequantize.h (same values, rounded once to fp16 / bf16).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cuda/quant_weight.h"

namespace inflight::kernels::cuda {

// out[o, i] (device [n, k], dtype fp16 or bf16) = w's value at (o, i) (quant_weight.h).
// k even for int4.
cudaError_t DequantizeWeight(void* out, DType dtype, const QuantWeight& w, std::int64_t n,
                             std::int64_t k, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
