// Attention for decode steps: one query token per sequence over its paged KV cache, with the KV
// range split across thread blocks for long sequences (flash-decoding) and a reduce. The same
// result as kernels/cpu/paged_attention.h on a batch whose sequences have one new row each.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "kernels/cuda/paged_batch.h"

namespace inflight::kernels::cuda {

// Keys per split chosen by PagedAttentionDecode (fp8_kv: PagedAttentionDecodeFp8) when
// partition_tokens is 0 (auto), for the keys `window` leaves visible. Small grids on Hopper run a
// kernel that copies K/V into shared memory, with a split size of its own: pass this function's
// value (or 0) to keep that choice.
std::int32_t DecodePartitionTokens(const PagedBatch& batch, std::int64_t num_kv_heads,
                                   const AttentionWindow& window, bool fp8_kv = false);

// Device workspace PagedAttentionDecode needs for this batch and window (0 when it runs unsplit).
std::size_t PagedAttentionDecodeWorkspaceBytes(const PagedBatch& batch, std::int64_t num_heads,
                                               std::int64_t head_dim, std::int32_t partition_tokens,
                                               const AttentionWindow& window);

// Precondition: every sequence has exactly one new row (query_start[s + 1] - query_start[s] == 1),
// at position num_cached[s], already written to the pools; it attends the positions [0,
// num_cached[s]] that `window` shows it (cpu::AttentionWindow; window 0: all, sink 0), and the
// splits cover those only: with a window a sequence of any length reads window + sink keys, and
// hidden positions are never read (they may hold NaN).
// Table rows hold at least ceil(max_kv_len / tokens_per_block) entries (entries past a sequence's
// own blocks may hold anything: they are read, never followed).
// q, out, scale, shape, dtype and head dims as PagedAttentionContext; q, k_pool and v_pool 16-byte
// aligned and q_token_stride a multiple of 8 (cudaErrorInvalidValue otherwise). Each block reads
// one kv head's keys once for up to 8 of the num_heads / num_kv_heads query heads that share it
// (once for all of them in groups of up to 8). partition_tokens: keys per split (a multiple of 64),
// or 0 for DecodePartitionTokens(batch, num_kv_heads, window); splits that start past a sequence's
// end (or its visible keys) do nothing, so a batch
// may be launched (or captured in a graph) with a max_kv_len above its longest sequence. workspace:
// device memory of at least PagedAttentionDecodeWorkspaceBytes(...) bytes (nullptr when that is 0),
// any contents. On sm_90+ the kernel launches as a programmatic dependent of the kernel before it
// in the stream and, before that kernel has finished, reads the batch's num_cached and block tables
// and asks L2 for cached K/V rows: that kernel may write q and each sequence's new row (as
// RopeKvWrite does), but not the tables, the lengths or older rows.
cudaError_t PagedAttentionDecode(void* out, const void* q, std::int64_t q_token_stride,
                                 const void* k_pool, const void* v_pool, const PagedBatch& batch,
                                 const PagedKvShape& shape, std::int64_t num_heads, float scale,
                                 const AttentionWindow& window, DType dtype,
                                 std::int32_t partition_tokens, void* workspace,
                                 std::size_t workspace_bytes, cudaStream_t stream);

// PagedAttentionDecode over an FP8 KV cache (paged_batch.h KvFp8Scales, written by
// RopeKvWriteFp8): the same batch, windows, splits and workspace (DecodePartitionTokens with fp8_kv
// true, PagedAttentionDecodeWorkspaceBytes), the keys and values read as code * scale (exact in
// dtype; k_scale multiplies the fp32 scores, v_scale the output), as cpu::PagedAttentionFp8 does.
// Head dims 64 and 128 (Fp8KvHeadDimSupported), scales finite and > 0; cudaErrorInvalidValue
// otherwise. Always the register-stream kernel (no shared-memory bulk copies).
cudaError_t PagedAttentionDecodeFp8(void* out, const void* q, std::int64_t q_token_stride,
                                    const void* k_pool, const void* v_pool,
                                    const KvFp8Scales& scales, const PagedBatch& batch,
                                    const PagedKvShape& shape, std::int64_t num_heads, float scale,
                                    const AttentionWindow& window, DType dtype,
                                    std::int32_t partition_tokens, void* workspace,
                                    std::size_t workspace_bytes, cudaStream_t stream);

}  // namespace inflight::kernels::cuda
