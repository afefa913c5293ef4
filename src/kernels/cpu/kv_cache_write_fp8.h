// KvCacheWrite for an FP8 KV cache: the same scatter (kernels/cpu/kv_cache_write.h), the pools
// holding E4M3 bytes [num_blocks, num_kv_heads, tokens_per_block, head_dim], each value stored as
// e4m3(value / scale) with the layer's k_scale or v_scale (saturating at ±448 * scale).
#pragma once

#include <cstdint>

#include "kernels/cpu/paged_kv.h"

namespace inflight::kernels::cpu {

void KvCacheWriteFp8(std::uint8_t* k_pool, std::uint8_t* v_pool, const float* k, const float* v,
                     std::int64_t kv_token_stride, const PagedBatch& batch,
                     const PagedKvShape& shape, float k_scale, float v_scale);

}  // namespace inflight::kernels::cpu
