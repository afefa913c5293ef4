// The context-phase attention kernel template; instantiated per head dim in
// paged_attention_context_hd*.cu so that the 2-core CI compiles them in parallel.
#pragma once

#include <cmath>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_batch.h"

namespace inflight::kernels::cuda::detail {

struct ContextArgs {
  void* out;
  const void* q;
  std::int64_t q_token_stride;
  const void* k_pool;
  const void* v_pool;
  PagedBatch batch;
  int num_heads;
  int num_kv_heads;
  int tokens_per_block;
  float scale_log2;  // scale * log2(e): scores are kept in base 2 so exp2f does the softmax
};

constexpr int kCtxRows = 32;      // query rows per block
constexpr int kCtxKeys = 32;      // keys per shared-memory tile
constexpr int kCtxThreads = 128;  // 4 threads per query row

template <int D>
constexpr int ContextSmemFloats() {
  // sQ [rows][D+1], sK [keys][D+1], sV [keys][D], sP [rows][keys+1]; the +1 pads break bank
  // conflicts between the 8 rows that one warp reads at the same column.
  return kCtxRows * (D + 1) + kCtxKeys * (D + 1) + kCtxKeys * D + kCtxRows * (kCtxKeys + 1);
}

// Grid: (ceil(max_query_len / kCtxRows), num_heads, num_seqs), Block: (kCtxThreads).
// Thread t owns query row t / 4 of the tile and, within it, keys and output columns t % 4 + 4j.
// Online softmax over key tiles: running max m and sum l per row, output rescaled by
// exp2(m_old - m_new) when the max grows; no S x S matrix exists anywhere.
template <typename T, int D>
__global__ void __launch_bounds__(kCtxThreads) ContextAttentionKernel(ContextArgs args) {
  static_assert(D % 4 == 0, "head_dim must be a multiple of 4");
  constexpr int DP = D + 1;
  constexpr int PP = kCtxKeys + 1;
  constexpr int kPerThreadKeys = kCtxKeys / 4;
  constexpr int kPerThreadCols = D / 4;
  extern __shared__ float smem[];
  float* sQ = smem;
  float* sK = sQ + kCtxRows * DP;
  float* sV = sK + kCtxKeys * DP;
  float* sP = sV + kCtxKeys * D;

  const PagedBatch& batch = args.batch;
  const int s = blockIdx.z, h = blockIdx.y;
  const int q_begin = batch.query_start[s];
  const int n_q = batch.query_start[s + 1] - q_begin;
  const int tile_q0 = blockIdx.x * kCtxRows;
  if (tile_q0 >= n_q) return;
  const int rows = min(kCtxRows, n_q - tile_q0);
  const int cached = batch.num_cached[s];
  const int kvh = h / (args.num_heads / args.num_kv_heads);
  const std::int32_t* table =
      batch.block_tables + static_cast<std::int64_t>(s) * batch.max_blocks_per_seq;
  const T* q = static_cast<const T*>(args.q);
  const T* k_pool = static_cast<const T*>(args.k_pool);
  const T* v_pool = static_cast<const T*>(args.v_pool);
  const int tid = threadIdx.x;

  for (int idx = tid; idx < kCtxRows * D; idx += kCtxThreads) {
    const int r = idx / D, d = idx - r * D;
    float val = 0.0f;
    if (r < rows) {
      val = ToFloat(q[static_cast<std::int64_t>(q_begin + tile_q0 + r) * args.q_token_stride +
                      static_cast<std::int64_t>(h) * D + d]) *
            args.scale_log2;
    }
    sQ[r * DP + d] = val;
  }

  const int r = tid >> 2, quad = tid & 3;
  const bool row_valid = r < rows;
  const int q_pos = cached + tile_q0 + r;
  const int kv_end = cached + tile_q0 + rows;  // the tile's last row sees keys [0, kv_end)
  float m = -INFINITY, l = 0.0f;
  float o[kPerThreadCols];
#pragma unroll
  for (int j = 0; j < kPerThreadCols; ++j) o[j] = 0.0f;

  for (int k0 = 0; k0 < kv_end; k0 += kCtxKeys) {
    __syncthreads();  // the previous tile's sK/sV/sP are no longer read (and sQ is complete)
    for (int idx = tid; idx < kCtxKeys * D; idx += kCtxThreads) {
      const int c = idx / D, d = idx - c * D;
      const int k_pos = k0 + c;
      float kval = 0.0f, vval = 0.0f;
      // NOTE: slots past kv_end may hold anything (NaN): never load them, since 0 * NaN = NaN.
      if (k_pos < kv_end) {
        const std::int64_t block = table[k_pos / args.tokens_per_block];
        const std::int64_t off = ((block * args.num_kv_heads + kvh) * args.tokens_per_block +
                                  k_pos % args.tokens_per_block) *
                                     D +
                                 d;
        kval = ToFloat(k_pool[off]);
        vval = ToFloat(v_pool[off]);
      }
      sK[c * DP + d] = kval;
      sV[c * D + d] = vval;
    }
    __syncthreads();

    float sc[kPerThreadKeys];
#pragma unroll
    for (int j = 0; j < kPerThreadKeys; ++j) sc[j] = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float qd = sQ[r * DP + d];
#pragma unroll
      for (int j = 0; j < kPerThreadKeys; ++j) sc[j] += qd * sK[(quad + 4 * j) * DP + d];
    }
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPerThreadKeys; ++j) {
      const int k_pos = k0 + quad + 4 * j;
      if (!row_valid || k_pos > q_pos) sc[j] = -INFINITY;
      tile_max = fmaxf(tile_max, sc[j]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m, tile_max);
    float p_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerThreadKeys; ++j) {
      const float p = sc[j] == -INFINITY ? 0.0f : exp2f(sc[j] - m_new);
      sP[r * PP + quad + 4 * j] = p;
      p_sum += p;
    }
    p_sum += __shfl_xor_sync(0xffffffffu, p_sum, 1);
    p_sum += __shfl_xor_sync(0xffffffffu, p_sum, 2);
    const float alpha = m == -INFINITY ? 0.0f : exp2f(m - m_new);
    l = l * alpha + p_sum;
    m = m_new;
#pragma unroll
    for (int j = 0; j < kPerThreadCols; ++j) o[j] *= alpha;
    __syncwarp();  // row r of sP is written and read by the same 4 lanes of one warp
    for (int c = 0; c < kCtxKeys; ++c) {
      const float p = sP[r * PP + c];
#pragma unroll
      for (int j = 0; j < kPerThreadCols; ++j) o[j] += p * sV[c * D + quad + 4 * j];
    }
  }

  if (row_valid) {
    T* out = static_cast<T*>(args.out) +
             (static_cast<std::int64_t>(q_begin + tile_q0 + r) * args.num_heads + h) * D;
    const float inv_l = 1.0f / l;
#pragma unroll
    for (int j = 0; j < kPerThreadCols; ++j) out[quad + 4 * j] = FromFloat<T>(o[j] * inv_l);
  }
}

template <typename T, int D>
cudaError_t LaunchContextAttention(const ContextArgs& args, cudaStream_t stream) {
  const int smem_bytes = ContextSmemFloats<D>() * static_cast<int>(sizeof(float));
  // NOTE: above 48 KiB dynamic shared memory needs an opt-in per kernel; it is idempotent.
  cudaError_t err = cudaFuncSetAttribute(ContextAttentionKernel<T, D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(CeilDiv(args.batch.max_query_len, kCtxRows)),
                  static_cast<unsigned>(args.num_heads),
                  static_cast<unsigned>(args.batch.num_seqs));
  ContextAttentionKernel<T, D><<<grid, kCtxThreads, smem_bytes, stream>>>(args);
  return cudaGetLastError();
}

// One per head dim, defined in paged_attention_context_hd<D>.cu.
cudaError_t LaunchContextAttentionHd64(const ContextArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchContextAttentionHd80(const ContextArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchContextAttentionHd96(const ContextArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchContextAttentionHd128(const ContextArgs& args, DType dtype, cudaStream_t stream);

}  // namespace inflight::kernels::cuda::detail
