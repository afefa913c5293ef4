// Quantized linears for steps of a few rows (decode): y = x · Wᵀ (+ bias) with W's codes
// (quant_weight.h) streamed once from HBM and dequantized in registers. A decode step's linear is a
// pass over its weights, so reading 1 byte (fp8, int8) or half a byte (int4) per weight instead of
// the 2 of a bf16 weight is the speed-up; the float GEMV (gemv.h) is the model.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cuda/quant_weight.h"

namespace inflight::kernels::cuda {

// Raises every GEMV kernel's dynamic shared memory limit to the current device's maximum, once, so
// that later launches on this device make no attribute call (which a CUDA graph capture may not
// allow). Call it at load, outside any capture (QuantLinear's constructor does); without it each
// launch past 48 KiB of inputs sets the attribute itself.
cudaError_t QuantGemvPrepareDevice();

// Whether QuantGemv takes these arguments: quant_linear_path.h's QuantGemvTakes on this device's
// shared memory, dtype fp16 / bf16, x 16-byte aligned with x_stride a multiple of 8, codes 16-byte
// aligned.
bool QuantGemvSupports(const QuantWeight& w, DType dtype, std::int64_t m, std::int64_t k,
                       const void* x, std::int64_t x_stride);

// y[t, o] = sum_i x[t, i] * w(o, i) (+ bias[o]) (+ y[t, o] when accumulate) for t < m, o < n;
// fp32 sums, one rounding to dtype (at m = 1 each 16-byte chunk's 16 or 32 products are first
// summed in fp16 on inputs scaled below 1: quant_gemv_half.cu). x: device [m, k] in dtype, row
// stride x_stride; fp8 weights multiply x rounded to E4M3 as the FP8 linear's activations
// (QuantizeActivationsFp8 with w.input_scale): the one-row kernel rounds as it reads, leaving x
// as it is, more rows are rounded in place first, so the caller must not read x afterwards.
// bias: device [n] in dtype or null; y: device [m, n] in dtype, row stride y_stride.
// cudaErrorNotSupported when !QuantGemvSupports(...).
cudaError_t QuantGemv(void* y, std::int64_t y_stride, void* x, std::int64_t x_stride,
                      const QuantWeight& w, const void* bias, DType dtype, std::int64_t m,
                      std::int64_t n, std::int64_t k, bool accumulate, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
