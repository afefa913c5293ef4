// RoPE (GPT-NeoX rotate-half layout, llama3 scaling through inv_freq) fused with writing the new
// K/V rows into the paged pools. CUDA twin of kernels/cpu/rope.h ApplyRope (on q and k) followed by
// kernels/cpu/kv_cache_write.h KvCacheWrite.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cuda/paged_batch.h"

namespace inflight::kernels::cuda {

// q, k, v: device rows of the step's new tokens, row r at q + r * token_stride (likewise k, v;
// usually three offsets into one fused qkv output); q holds num_heads heads, k and v
// shape.num_kv_heads heads, each shape.head_dim elements. Row r of sequence s is at position
// num_cached[s] + r - query_start[s].
// inv_freq: device [head_dim / 2] from cpu::RopeInvFrequencies, or nullptr for no rotary embedding
// (learned positions). With it, q and k are rotated in place (angle = fp32 position * inv_freq).
// Then k and v of each row go to the row's block and slot in k_pool / v_pool
// ([num_blocks, num_kv_heads, tokens_per_block, head_dim]). dtype: fp16 or bf16 for all of them.
cudaError_t RopeKvWrite(void* q, void* k, void* v, std::int64_t token_stride,
                        std::int64_t num_heads, void* k_pool, void* v_pool, const PagedBatch& batch,
                        const PagedKvShape& shape, const float* inv_freq, DType dtype,
                        cudaStream_t stream);

}  // namespace inflight::kernels::cuda
