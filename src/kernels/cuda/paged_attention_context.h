// Causal attention of a step's new query rows (prompt chunks, or any mix of lengths) over the paged
// KV cache, flash-attention style on tensor cores. CUDA twin of kernels/cpu/paged_attention.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cuda/paged_batch.h"

namespace inflight::kernels::cuda {

// q: row r at q + r * q_token_stride, num_heads heads of head_dim (already rotated).
// out: [num_tokens, num_heads, head_dim] contiguous. Row r of sequence s at position p =
// num_cached[s] + r - query_start[s] attends the positions [0, p] of its sequence that `window`
// shows it (cpu::AttentionWindow), all of which must be in the pools (RopeKvWrite first). Keys that
// no row of a query tile (128 rows) sees are never read (they may hold NaN, or a dropped block's
// garbage), and key tiles holding none it sees are skipped. window.window 0: full causal
// attention, sink 0. Query head h reads kv head h / (num_heads / num_kv_heads).
// softmax(scale * q·k), scale > 0, with fp32 scores and sums; the probabilities are rounded to
// dtype for the tensor-core product with V (as flash attention does). head_dim: 64, 80, 96 or 128;
// dtype fp16 or bf16. Pool slots past each sequence's last position are never read (they may hold
// NaN). q, k_pool and v_pool 16-byte aligned, q_token_stride a multiple of 8 (16-byte rows), out
// 4-byte aligned, window and sink >= 0 (sink 0 without a window); otherwise cudaErrorInvalidValue.
cudaError_t PagedAttentionContext(void* out, const void* q, std::int64_t q_token_stride,
                                  const void* k_pool, const void* v_pool, const PagedBatch& batch,
                                  const PagedKvShape& shape, std::int64_t num_heads, float scale,
                                  const AttentionWindow& window, DType dtype, cudaStream_t stream);

// PagedAttentionContext over an FP8 KV cache (paged_batch.h KvFp8Scales, written by
// RopeKvWriteFp8): the same batch, windows and preconditions, the keys and values read as code *
// scale (widened to dtype exactly; k_scale multiplies the fp32 scores, v_scale the output), as
// cpu::PagedAttentionFp8 does. Head dims 64 and 128 (Fp8KvHeadDimSupported), scales finite and
// > 0; cudaErrorInvalidValue otherwise. Runs on the wgmma kernel where its sm_90a code runs (the
// codes widened in shared memory), elsewhere (or with INFLIGHT_CONTEXT_WGMMA=0) on mma.sync.
cudaError_t PagedAttentionContextFp8(void* out, const void* q, std::int64_t q_token_stride,
                                     const void* k_pool, const void* v_pool,
                                     const KvFp8Scales& scales, const PagedBatch& batch,
                                     const PagedKvShape& shape, std::int64_t num_heads, float scale,
                                     const AttentionWindow& window, DType dtype,
                                     cudaStream_t stream);

}  // namespace inflight::kernels::cuda
