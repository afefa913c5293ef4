#include "kernels/cuda/paged_attention_decode.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/paged_attention_decode_impl.cuh"

namespace inflight::kernels::cuda {
namespace {

int MaxSplits(const PagedBatch& batch, std::int32_t partition_tokens) {
  return static_cast<int>(CeilDiv(batch.max_kv_len, partition_tokens));
}

int MultiprocessorCount() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 132;
  }
  return count;
}

}  // namespace

std::int32_t DecodePartitionTokens(const PagedBatch& batch, std::int64_t num_kv_heads) {
  // Split only when (sequence, kv head) blocks alone leave SMs idle, and then into pieces of at
  // least 256 keys so that each split amortises its reduce.
  const std::int64_t blocks = static_cast<std::int64_t>(batch.num_seqs) * num_kv_heads;
  const std::int64_t target_blocks = 2 * static_cast<std::int64_t>(MultiprocessorCount());
  const std::int64_t whole = std::max<std::int64_t>(
      detail::kDecKeys, CeilDiv(batch.max_kv_len, detail::kDecKeys) * detail::kDecKeys);
  if (blocks >= target_blocks || batch.max_kv_len <= 512) return static_cast<std::int32_t>(whole);
  const std::int64_t splits =
      std::min(CeilDiv(batch.max_kv_len, 256), CeilDiv(target_blocks, blocks));
  const std::int64_t per =
      CeilDiv(CeilDiv(batch.max_kv_len, splits), detail::kDecKeys) * detail::kDecKeys;
  return static_cast<std::int32_t>(per);
}

std::size_t PagedAttentionDecodeWorkspaceBytes(const PagedBatch& batch, std::int64_t num_heads,
                                               std::int64_t head_dim,
                                               std::int32_t partition_tokens) {
  if (partition_tokens <= 0 || batch.max_kv_len <= 0) return 0;
  const int splits = MaxSplits(batch, partition_tokens);
  if (splits <= 1) return 0;
  const std::size_t slots = static_cast<std::size_t>(batch.num_seqs) *
                            static_cast<std::size_t>(num_heads) * static_cast<std::size_t>(splits);
  return slots * (static_cast<std::size_t>(head_dim) + 2) * sizeof(float);
}

cudaError_t PagedAttentionDecode(void* out, const void* q, std::int64_t q_token_stride,
                                 const void* k_pool, const void* v_pool, const PagedBatch& batch,
                                 const PagedKvShape& shape, std::int64_t num_heads, float scale,
                                 DType dtype, std::int32_t partition_tokens, void* workspace,
                                 std::size_t workspace_bytes, cudaStream_t stream) {
  if (batch.num_seqs < 0 || batch.num_seqs > 65535 || num_heads <= 0 || shape.num_kv_heads <= 0 ||
      num_heads % shape.num_kv_heads != 0 || shape.tokens_per_block <= 0 || partition_tokens < 0 ||
      partition_tokens % detail::kDecKeys != 0) {
    return cudaErrorInvalidValue;
  }
  if (batch.num_seqs == 0) return cudaSuccess;
  if (partition_tokens == 0) partition_tokens = DecodePartitionTokens(batch, shape.num_kv_heads);
  const int max_splits = MaxSplits(batch, partition_tokens);
  const std::size_t need =
      PagedAttentionDecodeWorkspaceBytes(batch, num_heads, shape.head_dim, partition_tokens);
  if (need > 0 && (workspace == nullptr || workspace_bytes < need)) return cudaErrorInvalidValue;
  const std::size_t slots = static_cast<std::size_t>(batch.num_seqs) *
                            static_cast<std::size_t>(num_heads) *
                            static_cast<std::size_t>(std::max(max_splits, 1));
  float* part_o = static_cast<float*>(workspace);
  float* part_ml =
      part_o == nullptr ? nullptr : part_o + slots * static_cast<std::size_t>(shape.head_dim);
  detail::DecodeArgs args{out,
                          q,
                          q_token_stride,
                          k_pool,
                          v_pool,
                          batch,
                          static_cast<int>(num_heads),
                          static_cast<int>(shape.num_kv_heads),
                          static_cast<int>(shape.tokens_per_block),
                          scale * static_cast<float>(M_LOG2E),
                          partition_tokens,
                          std::max(max_splits, 1),
                          part_o,
                          part_ml};
  switch (shape.head_dim) {
    case 64:
      return detail::LaunchDecodeAttentionHd64(args, dtype, stream);
    case 80:
      return detail::LaunchDecodeAttentionHd80(args, dtype, stream);
    case 96:
      return detail::LaunchDecodeAttentionHd96(args, dtype, stream);
    case 128:
      return detail::LaunchDecodeAttentionHd128(args, dtype, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace inflight::kernels::cuda
