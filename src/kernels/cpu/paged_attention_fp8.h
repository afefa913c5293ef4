// PagedAttention (kernels/cpu/paged_attention.h) over an FP8 KV cache (kv_cache_write_fp8.h):
// each key and value row is dequantized on read, e4m3(code) * k_scale (v_scale), and the rest is
// the fp32 computation of the float cache, value for value.
#pragma once

#include <cstdint>

#include "kernels/cpu/paged_kv.h"
#include "kernels/cpu/thread_pool.h"

namespace inflight::kernels::cpu {

void PagedAttentionFp8(float* out, const float* q, std::int64_t q_token_stride,
                       const std::uint8_t* k_pool, const std::uint8_t* v_pool, float k_scale,
                       float v_scale, const PagedBatch& batch, const PagedKvShape& shape,
                       std::int64_t num_heads, float scale, const AttentionWindow& window,
                       ThreadPool* pool);

}  // namespace inflight::kernels::cpu
