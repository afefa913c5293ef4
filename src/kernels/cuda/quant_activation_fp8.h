// FP8 activations of a W8A8 linear: each input row quantized to E4M3 with its scale s (the
// linear's static input_scale, or the row's amax / 448), x = e4m3(x / s) * s. CUDA twin of
// kernels/cpu/fp8_activation.h: the rows are left in place as the values they dequantize to (the
// GEMV and the dequantizing fallback read those), or the codes and scales go out for cuBLASLt's FP8
// GEMM and the rows stay as they were (nothing reads them again: one pass of writes saved).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

// x: device [m, k] in dtype (fp16 / bf16) with row stride x_stride, rewritten in place when codes
// is null. static_scale > 0: every row's s; 0: per row, amax / 448 (1 for a row of zeros). codes:
// device [m, k] E4M3 (row stride k) or null; row_scales: device [m] fp32 (each row's s) or null.
cudaError_t QuantizeActivationsFp8(void* x, std::int64_t x_stride, DType dtype, std::int64_t m,
                                   std::int64_t k, float static_scale, std::uint8_t* codes,
                                   float* row_scales, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
