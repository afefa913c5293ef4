// Weight-only quantized linears (int4, int8) at more rows than the GEMV takes: y = x · Wᵀ on
// mma.sync tensor cores with W's codes dequantized in registers, so each weight crosses HBM as its
// half a byte (int4) or byte (int8) instead of being written out in the activation dtype first and
// read back by a float GEMM (the dequantizing path: 4.5 bytes a weight against this one's 0.5-1).
// The kernel: quant_gemm_mixed_kernel.cuh.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cuda/quant_weight.h"

namespace inflight::kernels::cuda {

// Raises the kernels' dynamic shared memory limits on the current device, once, so that later
// launches make no attribute call (a CUDA graph capture may not allow one). Call it at load,
// outside any capture (QuantLinear's constructor does); without it a launch sets the limit itself.
cudaError_t QuantMixedGemmPrepareDevice();

// Whether QuantMixedGemm takes these arguments: int4 or int8 codes without g_idx, scale groups of
// a power of two >= 32 columns (or one per row, or per tensor), k a multiple of 128, dtype fp16 /
// bf16, x 16-byte aligned with x_stride a multiple of 8, codes 16-byte aligned, m >= 1.
bool QuantMixedGemmSupports(const QuantWeight& w, DType dtype, std::int64_t m, std::int64_t k,
                            const void* x, std::int64_t x_stride);

// y[t, o] = sum_i x[t, i] * w(o, i) (+ bias[o]) (+ y[t, o] when accumulate) for t < m, o < n;
// each weight dequantized to dtype ((code - zero) exactly, times the scale rounded to dtype; bf16
// int8: times the fp32 scale, then rounded), fp32 sums, one rounding to dtype. x: device [m, k] in
// dtype, row stride x_stride, left as it is; bias: device [n] in dtype or null; y: device [m, n] in
// dtype, row stride y_stride. workspace: device scratch for partial sums where the grid splits k
// (up to workspace_bytes; any size works, 0 included: fewer splits). cudaErrorNotSupported when
// !QuantMixedGemmSupports(...).
cudaError_t QuantMixedGemm(void* y, std::int64_t y_stride, const void* x, std::int64_t x_stride,
                           const QuantWeight& w, const void* bias, DType dtype, std::int64_t m,
                           std::int64_t n, std::int64_t k, bool accumulate, void* workspace,
                           std::int64_t workspace_bytes, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
