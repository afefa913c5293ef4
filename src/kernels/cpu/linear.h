// Dense layer y = x · Wᵀ + b with W stored [out_features, in_features] in fp32, fp16 or bf16.
#pragma once

#include <cstdint>

#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/weight_ptr.h"

namespace inflight::kernels::cpu {

// x: [num_tokens, in_features] (row stride x_stride >= in_features); y: [num_tokens, out_features]
// contiguous; w: [out_features, in_features]; bias: [out_features] or absent.
// y[t, o] = sum_i x[t, i] * w[o, i] + bias[o], accumulated in fp32. Output rows are split across
// `pool` (nullptr: the calling thread only). y must not alias x.
void Linear(float* y, const float* x, std::int64_t x_stride, WeightPtr w, WeightPtr bias,
            std::int64_t num_tokens, std::int64_t in_features, std::int64_t out_features,
            ThreadPool* pool);

}  // namespace inflight::kernels::cpu
