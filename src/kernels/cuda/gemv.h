// Dense layers for steps of one row (batch-1 decode): y = x · Wᵀ (+ bias), each weight read
// once from HBM with streaming 16-byte loads. At these sizes a layer is a pass over its weights, so
// the kernel's only job is to keep enough loads in flight to run at the memory's read rate;
// cuBLASLt's small-m kernels reach 85-98% of the copy rate on the Llama-3.1-8B layers, this one
// aims above it (a read-mostly stream beats a copy: bench/results/2026-11-21-h100-baseline.md).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"

namespace inflight::kernels::cuda {

// The most rows (tokens) one call takes. The kernel is written for up to 4, but on an H100 (bench
// gpu_ceilings, 2026-11-21) 4 rows ran 1.1-1.4x slower than cuBLASLt on the Llama-3.1-8B layers
// (the block stages x in shared memory before its first weight load), while 1 row ran 0-10% faster:
// so only batch-1 decode takes this path.
constexpr std::int64_t kGemvMaxRows = 1;

// Whether Gemv / GemvSwiGlu take these arguments: dtype fp16 or bf16, 1 <= m <= kGemvMaxRows,
// k and x_stride multiples of 8, x and w 16-byte aligned, and m * k inputs fit in shared memory.
bool GemvSupports(DType dtype, std::int64_t m, std::int64_t k, std::int64_t x_stride, const void* x,
                  const void* w);

// y[t, o] = sum_i x[t, i] * w[o, i] (+ bias[o]) for t < m, o < n; fp32 accumulation and bias add,
// one rounding to y_dtype (dtype or fp32). x: [m, k] with row stride x_stride; w: [n, k]
// contiguous; bias: [n] in y_dtype or nullptr; y: [m, n] with row stride y_stride. accumulate:
// y's old value joins the fp32 sum before the rounding (y += x · Wᵀ (+ bias)).
// cudaErrorNotSupported when !GemvSupports(...) (the caller falls back to a GEMM).
cudaError_t Gemv(void* y, DType y_dtype, std::int64_t y_stride, const void* x,
                 std::int64_t x_stride, const void* w, const void* bias, DType dtype,
                 std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate,
                 cudaStream_t stream);

// The gated MLP's first layer and its activation in one pass: w is [2 * inter, k] with the gate
// rows first and the up rows after them (the layout kernels/cuda/activations.h SwiGlu reads), bias
// [2 * inter] in dtype or nullptr. out[t, i] = silu(g) * u with g = x[t]·w[i] (+ bias[i]) and
// u = x[t]·w[inter + i] (+ bias[inter + i]) in fp32, rounded once to dtype; out row stride
// out_stride. Same support rules as Gemv.
cudaError_t GemvSwiGlu(void* out, std::int64_t out_stride, const void* x, std::int64_t x_stride,
                       const void* w, const void* bias, DType dtype, std::int64_t m,
                       std::int64_t inter, std::int64_t k, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
