// The decode attention kernel template and its split reduce; instantiated per head dim in
// paged_attention_decode_hd*.cu.
#pragma once

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/paged_batch.h"

namespace inflight::kernels::cuda::detail {

struct DecodeArgs {
  void* out;
  const void* q;
  std::int64_t q_token_stride;
  const void* k_pool;
  const void* v_pool;
  PagedBatch batch;
  int num_heads;
  int num_kv_heads;
  int tokens_per_block;
  float scale_log2;
  int partition_tokens;  // keys per split
  int max_splits;        // gridDim.z; 1 writes `out` directly
  float* part_o;         // [num_seqs, num_heads, max_splits, D] unnormalised outputs
  float* part_ml;        // [num_seqs, num_heads, max_splits, 2] running max (base 2) and sum
};

constexpr int kDecKeys = 64;
constexpr int kDecThreads = 128;

inline int DecodeSmemFloats(int group, int head_dim) {
  // sQ [G][D], sK [keys][D+1], sV [keys][D], sS [G][keys], sM/sL/sAlpha [G], sO [G][D]
  return group * head_dim + kDecKeys * (head_dim + 1) + kDecKeys * head_dim + group * kDecKeys +
         3 * group + group * head_dim;
}

// Grid: (num_kv_heads, num_seqs, max_splits), Block: (kDecThreads).
// Block (kvh, s, z) handles keys [z * partition_tokens, min(kv_len, (z + 1) * partition_tokens))
// for the G = num_heads / num_kv_heads query heads of kv head kvh: each K/V tile is loaded once and
// used by all G heads. Online softmax per head across tiles, state in shared memory.
template <typename T, int D>
__global__ void __launch_bounds__(kDecThreads) DecodeAttentionKernel(DecodeArgs args) {
  constexpr int DP = D + 1;
  extern __shared__ float smem[];
  const int group = args.num_heads / args.num_kv_heads;
  float* sQ = smem;
  float* sK = sQ + group * D;
  float* sV = sK + kDecKeys * DP;
  float* sS = sV + kDecKeys * D;
  float* sM = sS + group * kDecKeys;
  float* sL = sM + group;
  float* sAlpha = sL + group;
  float* sO = sAlpha + group;

  const PagedBatch& batch = args.batch;
  const int kvh = blockIdx.x, s = blockIdx.y, split = blockIdx.z;
  const int kv_len = batch.num_cached[s] + 1;
  const int k_begin = split * args.partition_tokens;
  if (k_begin >= kv_len) return;
  const int k_end = min(kv_len, k_begin + args.partition_tokens);
  const int q_row = batch.query_start[s];
  const std::int32_t* table =
      batch.block_tables + static_cast<std::int64_t>(s) * batch.max_blocks_per_seq;
  const T* q = static_cast<const T*>(args.q);
  const T* k_pool = static_cast<const T*>(args.k_pool);
  const T* v_pool = static_cast<const T*>(args.v_pool);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int h0 = kvh * group;

  for (int idx = tid; idx < group * D; idx += kDecThreads) {
    const int g = idx / D, d = idx - g * D;
    sQ[idx] = ToFloat(q[static_cast<std::int64_t>(q_row) * args.q_token_stride +
                        static_cast<std::int64_t>(h0 + g) * D + d]) *
              args.scale_log2;
    sO[idx] = 0.0f;
  }
  for (int g = tid; g < group; g += kDecThreads) {
    sM[g] = -INFINITY;
    sL[g] = 0.0f;
  }

  for (int k0 = k_begin; k0 < k_end; k0 += kDecKeys) {
    __syncthreads();
    for (int idx = tid; idx < kDecKeys * D; idx += kDecThreads) {
      const int c = idx / D, d = idx - c * D;
      const int k_pos = k0 + c;
      float kval = 0.0f, vval = 0.0f;
      if (k_pos < k_end) {  // NOTE: never load slots past the range (they may hold NaN)
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
    for (int idx = tid; idx < group * kDecKeys; idx += kDecThreads) {
      const int g = idx / kDecKeys, c = idx - g * kDecKeys;
      float dot = 0.0f;
#pragma unroll 8
      for (int d = 0; d < D; ++d) dot += sQ[g * D + d] * sK[c * DP + d];
      sS[idx] = k0 + c < k_end ? dot : -INFINITY;
    }
    __syncthreads();
    for (int g = warp; g < group; g += kDecThreads / 32) {
      const float s0 = sS[g * kDecKeys + lane], s1 = sS[g * kDecKeys + lane + 32];
      const float m_old = sM[g];
      const float m_new = fmaxf(m_old, WarpMax(fmaxf(s0, s1)));
      const float p0 = s0 == -INFINITY ? 0.0f : exp2f(s0 - m_new);
      const float p1 = s1 == -INFINITY ? 0.0f : exp2f(s1 - m_new);
      sS[g * kDecKeys + lane] = p0;
      sS[g * kDecKeys + lane + 32] = p1;
      const float p_sum = WarpSum(p0 + p1);
      __syncwarp();  // every lane has read sM[g] before lane 0 overwrites it
      if (lane == 0) {
        const float alpha = m_old == -INFINITY ? 0.0f : exp2f(m_old - m_new);
        sAlpha[g] = alpha;
        sL[g] = sL[g] * alpha + p_sum;
        sM[g] = m_new;
      }
    }
    __syncthreads();
    for (int idx = tid; idx < group * D; idx += kDecThreads) {
      const int g = idx / D, d = idx - g * D;
      float acc = sO[idx] * sAlpha[g];
      const float* p = sS + g * kDecKeys;
#pragma unroll 8
      for (int c = 0; c < kDecKeys; ++c) acc += p[c] * sV[c * D + d];
      sO[idx] = acc;
    }
  }
  __syncthreads();

  if (args.max_splits == 1) {
    T* out =
        static_cast<T*>(args.out) + (static_cast<std::int64_t>(q_row) * args.num_heads + h0) * D;
    for (int idx = tid; idx < group * D; idx += kDecThreads) {
      out[idx] = FromFloat<T>(sO[idx] / sL[idx / D]);
    }
  } else {
    for (int idx = tid; idx < group * D; idx += kDecThreads) {
      const int g = idx / D, d = idx - g * D;
      const std::int64_t slot =
          (static_cast<std::int64_t>(s) * args.num_heads + h0 + g) * args.max_splits + split;
      args.part_o[slot * D + d] = sO[idx];
      if (d == 0) {
        args.part_ml[slot * 2] = sM[g];
        args.part_ml[slot * 2 + 1] = sL[g];
      }
    }
  }
}

// Grid: (num_heads, num_seqs), Block: (kDecThreads). Merges the splits of one (sequence, head):
// M = max m_i, out = sum_i o_i 2^(m_i - M) / sum_i l_i 2^(m_i - M).
template <typename T, int D>
__global__ void __launch_bounds__(kDecThreads) DecodeReduceKernel(DecodeArgs args) {
  const int h = blockIdx.x, s = blockIdx.y;
  const int kv_len = args.batch.num_cached[s] + 1;
  const int num_splits = (kv_len + args.partition_tokens - 1) / args.partition_tokens;
  const std::int64_t base = (static_cast<std::int64_t>(s) * args.num_heads + h) * args.max_splits;
  float m_max = -INFINITY;
  for (int i = 0; i < num_splits; ++i) m_max = fmaxf(m_max, args.part_ml[(base + i) * 2]);
  float l_sum = 0.0f;
  for (int i = 0; i < num_splits; ++i) {
    l_sum += args.part_ml[(base + i) * 2 + 1] * exp2f(args.part_ml[(base + i) * 2] - m_max);
  }
  T* out = static_cast<T*>(args.out) +
           (static_cast<std::int64_t>(args.batch.query_start[s]) * args.num_heads + h) * D;
  for (int d = threadIdx.x; d < D; d += kDecThreads) {
    float acc = 0.0f;
    for (int i = 0; i < num_splits; ++i) {
      acc += args.part_o[(base + i) * D + d] * exp2f(args.part_ml[(base + i) * 2] - m_max);
    }
    out[d] = FromFloat<T>(acc / l_sum);
  }
}

template <typename T, int D>
cudaError_t LaunchDecodeAttention(const DecodeArgs& args, cudaStream_t stream) {
  const int group = args.num_heads / args.num_kv_heads;
  const int smem_bytes = DecodeSmemFloats(group, D) * static_cast<int>(sizeof(float));
  cudaError_t err = cudaFuncSetAttribute(DecodeAttentionKernel<T, D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(args.num_kv_heads),
                  static_cast<unsigned>(args.batch.num_seqs),
                  static_cast<unsigned>(args.max_splits));
  DecodeAttentionKernel<T, D><<<grid, kDecThreads, smem_bytes, stream>>>(args);
  err = cudaGetLastError();
  if (err != cudaSuccess || args.max_splits == 1) return err;
  const dim3 reduce_grid(static_cast<unsigned>(args.num_heads),
                         static_cast<unsigned>(args.batch.num_seqs));
  DecodeReduceKernel<T, D><<<reduce_grid, kDecThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t LaunchDecodeAttentionHd64(const DecodeArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchDecodeAttentionHd80(const DecodeArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchDecodeAttentionHd96(const DecodeArgs& args, DType dtype, cudaStream_t stream);
cudaError_t LaunchDecodeAttentionHd128(const DecodeArgs& args, DType dtype, cudaStream_t stream);

}  // namespace inflight::kernels::cuda::detail
