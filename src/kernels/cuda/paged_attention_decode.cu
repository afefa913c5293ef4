#include "kernels/cuda/paged_attention_decode.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "common/env_switch.h"
#include "kernels/cuda/paged_attention_decode_impl.cuh"

namespace inflight::kernels::cuda {
namespace {

// The split rule (see DecodePartitionTokens), measured on an H100 (bench/gpu_kernels_bench.cu
// --sections decode and a sweep of every split size): blocks the grid may hold per SM (the
// attention kernel's occupancy), and the least and most keys per split.
constexpr std::int64_t kBlocksPerSm = 2;
constexpr std::int64_t kMinPartition = detail::kDecPartition;
constexpr std::int64_t kMaxPartition = 4096;

// Splits of partition_tokens keys the longest sequence's visible keys need: with a window, those of
// its sinks plus those of its recent keys (the kernels' DecodeWindowSplit), which bound every
// shorter sequence's.
int MaxSplits(const PagedBatch& batch, std::int32_t partition_tokens,
              const AttentionWindow& window) {
  if (!window.windowed()) return static_cast<int>(CeilDiv(batch.max_kv_len, partition_tokens));
  const std::int64_t recent = std::min<std::int64_t>(batch.max_kv_len, window.window);
  const std::int64_t sinks = std::min<std::int64_t>(
      window.sink, std::max<std::int64_t>(0, std::int64_t{batch.max_kv_len} - window.window));
  return static_cast<int>(CeilDiv(sinks, partition_tokens) + CeilDiv(recent, partition_tokens));
}

// The batch as the split rules see it: its longest sequence shortened to the keys `window` shows.
PagedBatch VisibleKeysBatch(const PagedBatch& batch, const AttentionWindow& window) {
  PagedBatch visible = batch;
  if (window.windowed() && batch.max_kv_len > 0) {
    visible.max_kv_len = static_cast<std::int32_t>(window.NumVisible(batch.max_kv_len - 1));
  }
  return visible;
}

std::int64_t RoundUp(std::int64_t x, std::int64_t to) {
  return CeilDiv(x, to) * to;
}

// Keys from the start of each split that its block asks L2 for before it waits on the kernel
// before it: all of them while the grid's reads fit in half of L2, else as many as do in whole
// 64-key steps (none when that is under one step). On an H100 this took 2-9% off batches 1-16 and
// batch 64 at 512 keys, left larger batches as they were, and cost 4% at 1 x 2048
// (bench/results/2026-11-21-h100-round-10.md). A window that slides along the split as its steps
// go was slower (2-6%) than this one at the start. INFLIGHT_DECODE_PREFETCH=<keys> overrides it
// (0: off), an A/B switch.
int PrefetchTokens(const PagedBatch& batch, std::int64_t num_kv_heads, std::int64_t head_dim,
                   std::int64_t kv_elem_bytes, std::int32_t partition_tokens, int max_splits) {
  static const long long from_env = EnvInteger("INFLIGHT_DECODE_PREFETCH", -1);
  if (from_env >= 0) return static_cast<int>(std::min<long long>(from_env, partition_tokens));
  const std::int64_t key_bytes = 2 * head_dim * kv_elem_bytes;
  const std::int64_t l2 = CurrentDeviceAttribute(cudaDevAttrL2CacheSize, 0);
  const std::int64_t blocks = std::int64_t{batch.num_seqs} * num_kv_heads * max_splits;
  const std::int64_t fits = l2 / 2 / std::max<std::int64_t>(1, blocks * key_bytes);
  const std::int64_t tokens = fits / detail::kDecPartition * detail::kDecPartition;
  return static_cast<int>(std::min<std::int64_t>(tokens, partition_tokens));
}

// The bulk-copy kernel (paged_attention_decode_bulk.cuh) takes splits of kBulkPartition keys: two
// 64-key stages copied into shared memory before its wait on the kernel before, a third asked of L2
// (on an H100 at 1 x 4096 and 2 x 4096, 192 keys beat 128 and 256 by 6-20%). It runs where those
// splits make at most kBulkBlocksPerSm blocks an SM (three fit beside each other), i.e. small
// batches at short to medium contexts, where a call's fixed costs weigh most.
constexpr std::int64_t kBulkPartition = 192;
constexpr std::int64_t kBulkBlocksPerSm = 3;

// INFLIGHT_DECODE_BULK=0 or 1 overrides the rule, an A/B switch.
bool UseBulkKernel(const PagedBatch& batch, std::int64_t num_kv_heads) {
  static const long long from_env = EnvInteger("INFLIGHT_DECODE_BULK", -1);
  if (from_env >= 0) return from_env != 0;
  const std::int64_t units = std::max<std::int64_t>(1, batch.num_seqs) * num_kv_heads;
  const std::int64_t sms = CurrentDeviceAttribute(cudaDevAttrMultiProcessorCount, 132);
  return units * CeilDiv(std::max<std::int64_t>(batch.max_kv_len, 1), kBulkPartition) <=
         kBulkBlocksPerSm * sms;
}

// The FP8 cache's register-stream kernel (where the bulk one does not run) held 231 registers a
// thread when it widened codes to bf16, so 2 blocks an SM; capped at 168 (3 blocks) it ran 14%
// faster at 1024 x 192 keys, 24% slower at 64 x 2048. With fp16 products it holds 161 and 3 blocks
// fit either way: 2 and 3 are within 2% of each other at every shape of inflight-bench-gpu-fp8-kv
// on an H200; 4 (128 registers, spills) was slower except at 64 x 2048. So 3 where the grid is
// many waves: at least 8 blocks an SM. INFLIGHT_DECODE_FP8_BLOCKS=2|3|4 forces one, an A/B switch.
int Fp8BlocksPerSm(std::int64_t grid_blocks) {
  static const int from_env = [] {
    const long long n = EnvInteger("INFLIGHT_DECODE_FP8_BLOCKS", 0);
    return n >= 2 && n <= 4 ? static_cast<int>(n) : 0;
  }();
  if (from_env != 0) return from_env;
  return grid_blocks >= 8 * CurrentDeviceAttribute(cudaDevAttrMultiProcessorCount, 132) ? 3 : 2;
}

// An FP8 cache's kernel: the bulk-copy one (three 64-key stages of its split in flight a block) or
// the register stream (one step in flight a warp). On an H200 (inflight-bench-gpu-fp8-kv,
// bench/results/2026-11-30-h200-fp8-decode-attention.md) the bulk kernel (then four stages) took
// 10-17% off every shape from 1 x 1024 to 1024 x 512 keys (1024 x 192: 185 -> 167 us, 256 x 1024:
// 173 -> 154) and tied at 8 x 2048; with three stages 1024 x 192 took 148 us. So it runs
// everywhere its sm_90a code does. INFLIGHT_DECODE_FP8_BULK=0 or 1 forces one, an A/B switch.
bool UseFp8BulkKernel() {
  static const long long from_env = EnvInteger("INFLIGHT_DECODE_FP8_BULK", -1);
  if (from_env >= 0) return from_env != 0;
  return true;
}

// DecodePartitionTokens for a batch whose kernel is already chosen (UseBulkKernel).
std::int32_t PartitionTokensFor(const PagedBatch& batch, std::int64_t num_kv_heads, bool bulk) {
  if (bulk) {
    return static_cast<std::int32_t>(
        std::min(kBulkPartition, RoundUp(std::max(batch.max_kv_len, 1), detail::kDecPartition)));
  }
  // As many splits as fit in one wave of blocks (kBlocksPerSm per SM) beside the (sequence, kv
  // head) pairs: the blocks then all run at once and finish together, and each split is as long as
  // it can be, which keeps the reduce small. One block more than a wave costs a whole second round
  // (an H100 at batch 4 x 8k context: 9 splits of 960 keys run at 77% of copy bandwidth, 8 of 1024
  // at 92%). Splits longer than kMaxPartition keys gain at most 1% (batch 64 and up), and shorter
  // ones keep a batch whose sequences differ in length balanced.
  const std::int64_t len = std::max<std::int64_t>(batch.max_kv_len, 1);
  const std::int64_t units = std::max<std::int64_t>(1, batch.num_seqs) * num_kv_heads;
  const std::int64_t splits = std::max<std::int64_t>(
      1,
      kBlocksPerSm *
          static_cast<std::int64_t>(CurrentDeviceAttribute(cudaDevAttrMultiProcessorCount, 132)) /
          units);
  const std::int64_t per = std::clamp(RoundUp(CeilDiv(len, splits), detail::kDecPartition),
                                      kMinPartition, kMaxPartition);
  return static_cast<std::int32_t>(std::min(per, RoundUp(len, detail::kDecPartition)));
}

}  // namespace

std::int32_t DecodePartitionTokens(const PagedBatch& batch, std::int64_t num_kv_heads,
                                   const AttentionWindow& window, bool fp8_kv) {
  const PagedBatch visible = VisibleKeysBatch(batch, window);
  return PartitionTokensFor(visible, num_kv_heads, !fp8_kv && UseBulkKernel(visible, num_kv_heads));
}

std::size_t PagedAttentionDecodeWorkspaceBytes(const PagedBatch& batch, std::int64_t num_heads,
                                               std::int64_t head_dim, std::int32_t partition_tokens,
                                               const AttentionWindow& window) {
  if (partition_tokens <= 0 || batch.max_kv_len <= 0) return 0;
  const int splits = MaxSplits(batch, partition_tokens, window);
  if (splits <= 1) return 0;
  const std::size_t slots = static_cast<std::size_t>(batch.num_seqs) *
                            static_cast<std::size_t>(num_heads) * static_cast<std::size_t>(splits);
  return slots * (static_cast<std::size_t>(head_dim) + 2) * sizeof(float);
}

namespace {

// PagedAttentionDecode over pools of T (fp8 null) or an FP8 cache's codes with their scales.
cudaError_t LaunchPagedAttentionDecode(
    void* out, const void* q, std::int64_t q_token_stride, const void* k_pool, const void* v_pool,
    const PagedBatch& batch, const PagedKvShape& shape, std::int64_t num_heads, float scale,
    const AttentionWindow& window, DType dtype, std::int32_t partition_tokens, void* workspace,
    std::size_t workspace_bytes, const KvFp8Scales* fp8, cudaStream_t stream) {
  const auto misaligned = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 != 0;
  };
  if (batch.num_seqs < 0 || batch.num_seqs > 65535 || num_heads <= 0 || shape.num_kv_heads <= 0 ||
      num_heads % shape.num_kv_heads != 0 || shape.tokens_per_block <= 0 || partition_tokens < 0 ||
      partition_tokens % detail::kDecPartition != 0 || q_token_stride % 8 != 0 || misaligned(q) ||
      misaligned(k_pool) || misaligned(v_pool) || misaligned(workspace) || window.window < 0 ||
      window.sink < 0 || (window.window == 0 && window.sink != 0)) {
    return cudaErrorInvalidValue;
  }
  if (batch.num_seqs == 0) return cudaSuccess;
  // The split rules see the visible keys: a long sequence with a window is a short one to them.
  const PagedBatch visible = VisibleKeysBatch(batch, window);
  // An FP8 cache's splits are the register stream's whichever kernel runs them
  // (DecodePartitionTokens).
  const bool bulk =
      fp8 == nullptr ? UseBulkKernel(visible, shape.num_kv_heads) : UseFp8BulkKernel();
  if (partition_tokens == 0) {
    partition_tokens = PartitionTokensFor(visible, shape.num_kv_heads, fp8 == nullptr && bulk);
  }
  const int max_splits = MaxSplits(batch, partition_tokens, window);
  if (max_splits > 65535) return cudaErrorInvalidValue;
  const std::size_t need = PagedAttentionDecodeWorkspaceBytes(batch, num_heads, shape.head_dim,
                                                              partition_tokens, window);
  if (need > 0 && (workspace == nullptr || workspace_bytes < need)) return cudaErrorInvalidValue;
  const std::size_t slots = static_cast<std::size_t>(batch.num_seqs) *
                            static_cast<std::size_t>(num_heads) *
                            static_cast<std::size_t>(std::max(max_splits, 1));
  float* part_o = static_cast<float*>(workspace);
  float* part_ml =
      part_o == nullptr ? nullptr : part_o + slots * static_cast<std::size_t>(shape.head_dim);
  const std::int64_t group = num_heads / shape.num_kv_heads;
  detail::DecodeArgs args{
      out, q, q_token_stride, k_pool, v_pool, batch, static_cast<int>(num_heads),
      static_cast<int>(shape.num_kv_heads), static_cast<int>(group),
      static_cast<int>(CeilDiv(group, detail::kDecTileHeads)),
      static_cast<int>(shape.tokens_per_block),
      // An FP8 cache's scores are k_scale * (q . codes).
      scale * static_cast<float>(M_LOG2E) * (fp8 != nullptr ? fp8->k : 1.0f), partition_tokens,
      std::max(max_splits, 1), part_o, part_ml,
      PrefetchTokens(batch, shape.num_kv_heads, shape.head_dim,
                     fp8 != nullptr ? std::int64_t{1} : static_cast<std::int64_t>(DTypeSize(dtype)),
                     partition_tokens, max_splits),
      CurrentDeviceIsSm90OrLater(), bulk, window.window, window.sink,
      fp8 != nullptr ? fp8->v : 1.0f,
      fp8 != nullptr
          ? Fp8BlocksPerSm(std::int64_t{batch.num_seqs} * shape.num_kv_heads *
                           CeilDiv(group, detail::kDecTileHeads) * std::max(max_splits, 1))
          : 2};
  if (fp8 != nullptr) {
    switch (shape.head_dim) {
      case 64:
        return detail::LaunchDecodeAttentionFp8Hd64(args, dtype, stream);
      case 128:
        return detail::LaunchDecodeAttentionFp8Hd128(args, dtype, stream);
      default:
        return cudaErrorInvalidValue;
    }
  }
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

}  // namespace

cudaError_t PagedAttentionDecode(void* out, const void* q, std::int64_t q_token_stride,
                                 const void* k_pool, const void* v_pool, const PagedBatch& batch,
                                 const PagedKvShape& shape, std::int64_t num_heads, float scale,
                                 const AttentionWindow& window, DType dtype,
                                 std::int32_t partition_tokens, void* workspace,
                                 std::size_t workspace_bytes, cudaStream_t stream) {
  return LaunchPagedAttentionDecode(out, q, q_token_stride, k_pool, v_pool, batch, shape, num_heads,
                                    scale, window, dtype, partition_tokens, workspace,
                                    workspace_bytes, nullptr, stream);
}

cudaError_t PagedAttentionDecodeFp8(void* out, const void* q, std::int64_t q_token_stride,
                                    const void* k_pool, const void* v_pool,
                                    const KvFp8Scales& scales, const PagedBatch& batch,
                                    const PagedKvShape& shape, std::int64_t num_heads, float scale,
                                    const AttentionWindow& window, DType dtype,
                                    std::int32_t partition_tokens, void* workspace,
                                    std::size_t workspace_bytes, cudaStream_t stream) {
  if (!scales.valid() || !Fp8KvHeadDimSupported(shape.head_dim)) return cudaErrorInvalidValue;
  return LaunchPagedAttentionDecode(out, q, q_token_stride, k_pool, v_pool, batch, shape, num_heads,
                                    scale, window, dtype, partition_tokens, workspace,
                                    workspace_bytes, &scales, stream);
}

}  // namespace inflight::kernels::cuda
