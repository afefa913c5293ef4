#include "kernels/cuda/rope_kv_write.h"

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 128;

// The sequence that owns row `row`: the last s with query_start[s] <= row.
__device__ __forceinline__ int SequenceOfRow(const std::int32_t* query_start, int num_seqs,
                                             int row) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (query_start[mid] <= row) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Grid: (num_tokens, WorkBlocks(...)), Block: (kThreads). Thread j of the row's work blocks owns
// rotation pair j (i, i + half) and K/V element j, so the in-place update needs no synchronisation
// and a decode step's row is spread over ~20 blocks instead of looping in one (a loop of dependent
// loads and sincosf made one decode row take ~10 us on an H100).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    RopeKvWriteKernel(T* q, T* k, T* v, std::int64_t token_stride, int num_heads, T* k_pool,
                      T* v_pool, PagedBatch batch, int num_kv_heads, int tokens_per_block,
                      int head_dim, const float* inv_freq) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const int row = blockIdx.x;
  const int s = SequenceOfRow(batch.query_start, batch.num_seqs, row);
  const int pos = batch.num_cached[s] + row - batch.query_start[s];
  const std::int64_t block =
      batch.block_tables[static_cast<std::int64_t>(s) * batch.max_blocks_per_seq +
                         pos / tokens_per_block];
  const int slot = pos % tokens_per_block;
  const std::int64_t row_off = static_cast<std::int64_t>(row) * token_stride;
  const auto pool_off = [&](int kv_head) {
    return ((block * num_kv_heads + kv_head) * tokens_per_block + slot) * head_dim;
  };
  const int half = head_dim / 2;
  const int idx = blockIdx.y * kThreads + threadIdx.x;
  if (inv_freq != nullptr && idx < (num_heads + num_kv_heads) * half) {
    const int head = idx / half, i = idx - head * half;
    float sin_a, cos_a;
    sincosf(static_cast<float>(pos) * inv_freq[i], &sin_a, &cos_a);
    const bool is_q = head < num_heads;
    const int kvh = head - num_heads;
    T* x = is_q ? q + row_off + static_cast<std::int64_t>(head) * head_dim
                : k + row_off + static_cast<std::int64_t>(kvh) * head_dim;
    const float a = ToFloat(x[i]), b = ToFloat(x[i + half]);
    const T ra = FromFloat<T>(a * cos_a - b * sin_a);
    const T rb = FromFloat<T>(b * cos_a + a * sin_a);
    x[i] = ra;
    x[i + half] = rb;
    if (!is_q) {
      T* dst = k_pool + pool_off(kvh);
      dst[i] = ra;
      dst[i + half] = rb;
    }
  }
  if (idx < num_kv_heads * head_dim) {
    const int kvh = idx / head_dim, d = idx - kvh * head_dim;
    if (inv_freq == nullptr) k_pool[pool_off(kvh) + d] = k[row_off + idx];
    v_pool[pool_off(kvh) + d] = v[row_off + idx];
  }
}

// Blocks per row: one thread per rotation pair and per K/V element, whichever is more.
unsigned WorkBlocks(std::int64_t num_heads, const PagedKvShape& shape) {
  const std::int64_t pairs = (num_heads + shape.num_kv_heads) * (shape.head_dim / 2);
  const std::int64_t kv = shape.num_kv_heads * shape.head_dim;
  return static_cast<unsigned>(CeilDiv(pairs > kv ? pairs : kv, kThreads));
}

}  // namespace

cudaError_t RopeKvWrite(void* q, void* k, void* v, std::int64_t token_stride,
                        std::int64_t num_heads, void* k_pool, void* v_pool, const PagedBatch& batch,
                        const PagedKvShape& shape, const float* inv_freq, DType dtype,
                        cudaStream_t stream) {
  if (batch.num_tokens < 0 || batch.num_seqs <= 0 || shape.head_dim <= 0 ||
      shape.head_dim % 2 != 0 || shape.num_kv_heads <= 0 || shape.tokens_per_block <= 0 ||
      num_heads <= 0) {
    return cudaErrorInvalidValue;
  }
  if (batch.num_tokens == 0) return cudaSuccess;
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    const dim3 grid(static_cast<unsigned>(batch.num_tokens), WorkBlocks(num_heads, shape));
    return LaunchProgrammatic(RopeKvWriteKernel<T>, grid, dim3(kThreads), 0, stream,
                              static_cast<T*>(q), static_cast<T*>(k), static_cast<T*>(v),
                              token_stride, static_cast<int>(num_heads), static_cast<T*>(k_pool),
                              static_cast<T*>(v_pool), batch, static_cast<int>(shape.num_kv_heads),
                              static_cast<int>(shape.tokens_per_block),
                              static_cast<int>(shape.head_dim), inv_freq);
  });
  return cudaSuccess;
}

}  // namespace inflight::kernels::cuda
