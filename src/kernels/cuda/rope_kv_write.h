// RoPE (GPT-NeoX rotate-half layout; every scaling through inv_freq, yarn's attention factor as a
// scale on cos and sin, dynamic RoPE as a table per sequence) fused with writing the new K/V rows
// into the paged pools, and optionally with Qwen3's per-head q/k RMSNorm before the rotation. CUDA
// twin of kernels/cpu/rmsnorm.h HeadRmsNorm (on q and k, when asked), then kernels/cpu/rope.h
// ApplyRope (on q and k), then kernels/cpu/kv_cache_write.h KvCacheWrite.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cuda/paged_batch.h"

namespace inflight::kernels::cuda {

// The rotary embedding of a step. inv_freq: device, from cpu::RopeInvFrequencies (one row of
// head_dim / 2 for every sequence, seq_stride 0) or cpu::RopeDynamicInvFrequencies (dynamic RoPE:
// row s of [num_seqs, head_dim / 2] for sequence s of the batch, seq_stride head_dim / 2), or
// nullptr for no rotary embedding (learned positions). cos and sin are multiplied by scale (yarn's
// attention_factor; 1 otherwise), as cpu::ApplyRope does.
struct RopeTable {
  const float* inv_freq = nullptr;
  std::int32_t seq_stride = 0;
  float scale = 1.0f;
};

// Qwen3's q_norm and k_norm: every query head and key head is RMS-normalised over head_dim, then
// scaled by q (query heads) or k (key heads), device [head_dim] in the activation dtype. Both null:
// no norm.
struct QkNormWeights {
  const void* q = nullptr;
  const void* k = nullptr;
  float eps = 1e-6f;
  bool enabled() const { return q != nullptr; }
};

// q, k, v: device rows of the step's new tokens, row r at q + r * token_stride (likewise k, v;
// usually three offsets into one fused qkv output); q holds num_heads heads, k and v
// shape.num_kv_heads heads, each shape.head_dim elements. Row r of sequence s is at position
// num_cached[s] + r - query_start[s].
// With a rope table, q and k are rotated in place (angle = fp32 position * inv_freq). With
// qk_norm enabled, each head of q and k is first normalised in fp32 (one rounding, after the
// rotation); that needs a rope table, head_dim % 16 == 0 and at most 512, token_stride % 8 == 0
// and 16-byte aligned q, k, v, pools and weights (cudaErrorInvalidValue otherwise). Then k and v of
// each row go to the row's block and slot in k_pool / v_pool ([num_blocks, num_kv_heads,
// tokens_per_block, head_dim]). dtype: fp16 or bf16 for all of them.
cudaError_t RopeKvWrite(void* q, void* k, void* v, std::int64_t token_stride,
                        std::int64_t num_heads, void* k_pool, void* v_pool, const PagedBatch& batch,
                        const PagedKvShape& shape, const RopeTable& rope,
                        const QkNormWeights& qk_norm, DType dtype, cudaStream_t stream);

// RopeKvWrite into an FP8 KV cache: k_pool and v_pool hold E4M3 bytes (paged_batch.h
// KvFp8Scales), each element of the new k and v rows (after the norm and rotation, rounded to dtype
// as RopeKvWrite writes them into q and k) stored as e4m3(x / scales.k) (scales.v for v),
// saturating at ±448, rounded to nearest even: cpu::KvCacheWriteFp8's codes. scales both finite and
// > 0.
cudaError_t RopeKvWriteFp8(void* q, void* k, void* v, std::int64_t token_stride,
                           std::int64_t num_heads, void* k_pool, void* v_pool,
                           const PagedBatch& batch, const PagedKvShape& shape,
                           const RopeTable& rope, const QkNormWeights& qk_norm, DType dtype,
                           const KvFp8Scales& scales, cudaStream_t stream);

// One table for every sequence, scale 1 (or inv_freq nullptr: no rotary embedding), no q/k norm.
inline cudaError_t RopeKvWrite(void* q, void* k, void* v, std::int64_t token_stride,
                               std::int64_t num_heads, void* k_pool, void* v_pool,
                               const PagedBatch& batch, const PagedKvShape& shape,
                               const float* inv_freq, DType dtype, cudaStream_t stream) {
  return RopeKvWrite(q, k, v, token_stride, num_heads, k_pool, v_pool, batch, shape,
                     RopeTable{inv_freq, 0, 1.0f}, QkNormWeights{}, dtype, stream);
}

}  // namespace inflight::kernels::cuda
