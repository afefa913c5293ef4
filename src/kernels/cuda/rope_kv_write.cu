#include "kernels/cuda/rope_kv_write.h"

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/fp8_kv.cuh"

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

// What both kernels take: RopeKvWrite's arguments, typed. inv_freq nullptr: no rotation. P: the
// pools' element, T (fp16 / bf16 pools) or Fp8Code (an FP8 KV cache, RopeKvWriteFp8).
template <typename T, typename P = T>
struct RopeKvArgs {
  using Pool = P;
  static constexpr bool kQkNorm = false;
  T* q;
  T* k;
  T* v;
  std::int64_t token_stride;
  int num_heads;
  P* k_pool;
  P* v_pool;
  PagedBatch batch;
  int num_kv_heads, tokens_per_block, head_dim;
  const float* inv_freq;
  int inv_freq_seq_stride;  // 0: one table; head_dim / 2: a table per sequence
  float scale;              // on cos and sin
  float k_scale = 1.0f;     // FP8 pools only: codes of k / k_scale and v / v_scale
  float v_scale = 1.0f;
};

// The vector kernel's arguments with Qwen3's q/k norm (a type of its own, so that the kernels
// without the norm keep their parameters and code).
template <typename T, typename P = T>
struct RopeKvNormArgs : RopeKvArgs<T, P> {
  static constexpr bool kQkNorm = true;
  const T* q_norm;  // [head_dim] each
  const T* k_norm;
  float norm_eps;
};

// Where row `row` of the step goes: its position, its offset in q/k/v, and its KV-cache slot.
struct RowSlot {
  template <typename T, typename P>
  __device__ __forceinline__ RowSlot(const RopeKvArgs<T, P>& a, int row)
      : num_kv_heads(a.num_kv_heads), tokens_per_block(a.tokens_per_block), head_dim(a.head_dim) {
    const PagedBatch& batch = a.batch;
    const int s = SequenceOfRow(batch.query_start, batch.num_seqs, row);
    seq = s;
    pos = batch.num_cached[s] + row - batch.query_start[s];
    block = batch.block_tables[static_cast<std::int64_t>(s) * batch.max_blocks_per_seq +
                               pos / tokens_per_block];
    slot = pos % tokens_per_block;
    row_off = static_cast<std::int64_t>(row) * a.token_stride;
  }
  // Element offset of this row's slot of KV head kv_head in a pool.
  __device__ __forceinline__ std::int64_t PoolOffset(int kv_head) const {
    return ((block * num_kv_heads + kv_head) * tokens_per_block + slot) * head_dim;
  }
  int num_kv_heads, tokens_per_block, head_dim;
  int seq;
  int pos;
  std::int64_t block;
  int slot;
  std::int64_t row_off;
};

// One K or V element as the pool holds it.
template <typename P, typename T>
__device__ __forceinline__ P ToPool(T x, float scale) {
  if constexpr (std::is_same_v<P, T>) {
    return x;
  } else {
    return EncodeFp8(ToFloat(x), scale);
  }
}

// Eight K or V elements (16 bytes of T) into the pool at dst (16-byte aligned for T pools, 8-byte
// for FP8 ones).
template <typename T, typename P>
__device__ __forceinline__ void StorePool8(P* dst, const uint4& bits, float scale) {
  if constexpr (std::is_same_v<P, T>) {
    *reinterpret_cast<uint4*>(dst) = bits;
  } else {
    *reinterpret_cast<uint2*>(dst) = EncodeFp8x8<T>(bits, scale);
  }
}

// Grid: (num_tokens, WorkBlocks(...)), Block: (kThreads). Thread j of the row's work blocks owns
// rotation pair j (i, i + half) and K/V element j, so the in-place update needs no synchronisation
// and a decode step's row is spread over ~20 blocks instead of looping in one (a loop of dependent
// loads and sincosf made one decode row take ~10 us on an H100).
template <typename T, bool kTableOrScale, typename P>
__global__ void __launch_bounds__(kThreads) RopeKvWriteKernel(RopeKvArgs<T, P> args) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const RowSlot at(args, static_cast<int>(blockIdx.x));
  const int half = args.head_dim / 2;
  const int idx = blockIdx.y * kThreads + threadIdx.x;
  if (args.inv_freq != nullptr && idx < (args.num_heads + args.num_kv_heads) * half) {
    const int head = idx / half, i = idx - head * half;
    const float* inv_freq =
        kTableOrScale ? args.inv_freq + at.seq * args.inv_freq_seq_stride : args.inv_freq;
    float sin_a, cos_a;
    sincosf(static_cast<float>(at.pos) * inv_freq[i], &sin_a, &cos_a);
    if constexpr (kTableOrScale) {
      sin_a *= args.scale;
      cos_a *= args.scale;
    }
    const bool is_q = head < args.num_heads;
    const int kvh = head - args.num_heads;
    T* x = is_q ? args.q + at.row_off + static_cast<std::int64_t>(head) * args.head_dim
                : args.k + at.row_off + static_cast<std::int64_t>(kvh) * args.head_dim;
    const float a = ToFloat(x[i]), b = ToFloat(x[i + half]);
    const T ra = FromFloat<T>(a * cos_a - b * sin_a);
    const T rb = FromFloat<T>(b * cos_a + a * sin_a);
    x[i] = ra;
    x[i + half] = rb;
    if (!is_q) {
      P* dst = args.k_pool + at.PoolOffset(kvh);
      dst[i] = ToPool<P>(ra, args.k_scale);
      dst[i + half] = ToPool<P>(rb, args.k_scale);
    }
  }
  if (idx < args.num_kv_heads * args.head_dim) {
    const int kvh = idx / args.head_dim, d = idx - kvh * args.head_dim;
    if (args.inv_freq == nullptr)
      args.k_pool[at.PoolOffset(kvh) + d] = ToPool<P>(args.k[at.row_off + idx], args.k_scale);
    args.v_pool[at.PoolOffset(kvh) + d] = ToPool<P>(args.v[at.row_off + idx], args.v_scale);
  }
}

// Threads that hold one head's rotation pairs in the vector kernel: head_dim / 16 without the q/k
// norm; with it, the next power of two, so that a head's threads are an aligned group of a warp
// whose shuffles sum the head's squares (the extra threads hold zeros).
__host__ __device__ __forceinline__ int HeadLanes(int head_dim, bool qk_norm) {
  const int chunks = head_dim / 16;
  if (!qk_norm) return chunks;
  int lanes = 1;
  while (lanes < chunks) lanes *= 2;
  return lanes;
}

// The sum of v over this thread's aligned group of `lanes` threads (a power of two, <= 32).
__device__ __forceinline__ float GroupSum(float v, int lanes) {
  const unsigned lane = threadIdx.x & 31u;
  const unsigned group = lanes == 32
                             ? 0xffffffffu
                             : ((1u << lanes) - 1u) << (lane & ~static_cast<unsigned>(lanes - 1));
  for (int offset = lanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(group, v, offset);
  return v;
}

// The 16-byte form of the kernel above, for head_dim % 16 == 0 and 16-byte aligned rows and pools.
// The scalar kernel ran at 39% of the copy rate at 8192 tokens on an H100: 2-byte accesses, and
// every query and KV head computed the same angles again. Here thread (chunk c, head group g) owns
// rotation pairs [8c, 8c + 8) of heads g, g + G, ... (G head groups per row across the grid's y):
// 8 sincosf a thread, shared by all its heads. Args RopeKvNormArgs: Qwen3's q/k norm first, a
// head's threads (HeadLanes) summing its squares with shuffles and scaling their pairs by the
// head's 1 / rms and the norm weight. Grid: (num_tokens, heads_split), Block: (kThreads).
template <typename T, bool kTableOrScale, typename Args>
__global__ void __launch_bounds__(kThreads) RopeKvWriteVec8Kernel(Args args) {
  constexpr bool kQkNorm = Args::kQkNorm;
  using P = typename Args::Pool;
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const RowSlot at(args, static_cast<int>(blockIdx.x));
  const int half = args.head_dim / 2, chunks = half / 8;
  const int lanes = kQkNorm ? HeadLanes(args.head_dim, true) : chunks, groups = kThreads / lanes;
  const int c = static_cast<int>(threadIdx.x) % lanes, g = static_cast<int>(threadIdx.x) / lanes;
  const int total_heads = args.num_heads + args.num_kv_heads;
  int head = static_cast<int>(blockIdx.y) * groups + g;
  if (args.inv_freq != nullptr && g < groups && head < total_heads) {
    // kQkNorm: threads past the head's chunks only take part in its sums.
    const bool owns = !kQkNorm || c < chunks;
    const int i0 = owns ? 8 * c : 0;
    const float* inv_freq =
        kTableOrScale ? args.inv_freq + at.seq * args.inv_freq_seq_stride : args.inv_freq;
    float cos_a[8], sin_a[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      sincosf(static_cast<float>(at.pos) * inv_freq[i0 + j], &sin_a[j], &cos_a[j]);
      if constexpr (kTableOrScale) {
        sin_a[j] *= args.scale;
        cos_a[j] *= args.scale;
      }
    }
    Vec8<T> wq_a, wq_b, wk_a, wk_b;  // this thread's pairs of the norm weights
    if constexpr (kQkNorm) {
      wq_a.bits = *reinterpret_cast<const uint4*>(args.q_norm + i0);
      wq_b.bits = *reinterpret_cast<const uint4*>(args.q_norm + i0 + half);
      wk_a.bits = *reinterpret_cast<const uint4*>(args.k_norm + i0);
      wk_b.bits = *reinterpret_cast<const uint4*>(args.k_norm + i0 + half);
    }
    for (; head < total_heads; head += groups * static_cast<int>(gridDim.y)) {
      const bool is_q = head < args.num_heads;
      const int kvh = head - args.num_heads;
      T* x = (is_q ? args.q + static_cast<std::int64_t>(head) * args.head_dim
                   : args.k + static_cast<std::int64_t>(kvh) * args.head_dim) +
             at.row_off + i0;
      Vec8<T> a, b, ra, rb;
      a.bits = *reinterpret_cast<const uint4*>(x);
      b.bits = *reinterpret_cast<const uint4*>(x + half);
      float norm_a[8], norm_b[8];  // kQkNorm: the pairs normalised
      if constexpr (kQkNorm) {
        float squares = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          norm_a[j] = ToFloat(a.e[j]);
          norm_b[j] = ToFloat(b.e[j]);
          squares += norm_a[j] * norm_a[j] + norm_b[j] * norm_b[j];
        }
        squares = GroupSum(owns ? squares : 0.0f, lanes);
        const float inv_rms = rsqrtf(squares / static_cast<float>(args.head_dim) + args.norm_eps);
        const Vec8<T>& w_a = is_q ? wq_a : wk_a;
        const Vec8<T>& w_b = is_q ? wq_b : wk_b;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          norm_a[j] *= inv_rms * ToFloat(w_a.e[j]);
          norm_b[j] *= inv_rms * ToFloat(w_b.e[j]);
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float fa = kQkNorm ? norm_a[j] : ToFloat(a.e[j]);
        const float fb = kQkNorm ? norm_b[j] : ToFloat(b.e[j]);
        ra.e[j] = FromFloat<T>(fa * cos_a[j] - fb * sin_a[j]);
        rb.e[j] = FromFloat<T>(fb * cos_a[j] + fa * sin_a[j]);
      }
      if (!owns) continue;
      *reinterpret_cast<uint4*>(x) = ra.bits;
      *reinterpret_cast<uint4*>(x + half) = rb.bits;
      if (!is_q) {
        P* dst = args.k_pool + at.PoolOffset(kvh) + i0;
        StorePool8<T>(dst, ra.bits, args.k_scale);
        StorePool8<T>(dst + half, rb.bits, args.k_scale);
      }
    }
  }
  // V, and K too without rotary embeddings: 16-byte chunks of the row's KV heads.
  const int kv_chunks = args.num_kv_heads * args.head_dim / 8;
  for (int idx = static_cast<int>(blockIdx.y * kThreads + threadIdx.x); idx < kv_chunks;
       idx += kThreads * static_cast<int>(gridDim.y)) {
    const int kvh = idx * 8 / args.head_dim, d = idx * 8 - kvh * args.head_dim;
    const std::int64_t src = at.row_off + static_cast<std::int64_t>(kvh) * args.head_dim + d;
    const std::int64_t dst = at.PoolOffset(kvh) + d;
    if (args.inv_freq == nullptr) {
      StorePool8<T>(args.k_pool + dst, *reinterpret_cast<const uint4*>(args.k + src), args.k_scale);
    }
    StorePool8<T>(args.v_pool + dst, *reinterpret_cast<const uint4*>(args.v + src), args.v_scale);
  }
}

// The vector kernel's y blocks per row: enough that each thread rotates one head while the grid is
// small (a decode step's few rows), one block per row (every thread looping over its heads) once
// rows alone fill the card.
unsigned Vec8HeadSplits(std::int64_t num_tokens, std::int64_t num_heads, const PagedKvShape& shape,
                        bool qk_norm) {
  if (num_tokens >= 256) return 1;
  const std::int64_t groups = kThreads / HeadLanes(static_cast<int>(shape.head_dim), qk_norm);
  return static_cast<unsigned>(CeilDiv(num_heads + shape.num_kv_heads, groups));
}

// Blocks per row: one thread per rotation pair and per K/V element, whichever is more.
unsigned WorkBlocks(std::int64_t num_heads, const PagedKvShape& shape) {
  const std::int64_t pairs = (num_heads + shape.num_kv_heads) * (shape.head_dim / 2);
  const std::int64_t kv = shape.num_kv_heads * shape.head_dim;
  return static_cast<unsigned>(CeilDiv(pairs > kv ? pairs : kv, kThreads));
}

// Launches the kernel for the arguments: the vector kernel (vec8), with the q/k norm when asked.
template <typename T, typename P>
cudaError_t LaunchRopeKvWrite(const RopeKvArgs<T, P>& args, bool vec8, const QkNormWeights& qk_norm,
                              const PagedKvShape& shape, std::int64_t num_heads,
                              const RopeTable& rope, cudaStream_t stream) {
  const std::int64_t num_tokens = args.batch.num_tokens;
  // NOTE: engines with one table and scale 1 (all but yarn and dynamic RoPE) take kernels
  // without the table offset and the two multiplies, the code they ran before those existed.
  const bool table_or_scale = rope.seq_stride != 0 || rope.scale != 1.0f;
  if (vec8) {
    const dim3 grid(static_cast<unsigned>(num_tokens),
                    Vec8HeadSplits(num_tokens, num_heads, shape, qk_norm.enabled()));
    if (qk_norm.enabled()) {
      // One kernel for every table: its offset and scale cost little beside the norm.
      const RopeKvNormArgs<T, P> norm_args{args, static_cast<const T*>(qk_norm.q),
                                           static_cast<const T*>(qk_norm.k), qk_norm.eps};
      return LaunchProgrammatic(RopeKvWriteVec8Kernel<T, true, RopeKvNormArgs<T, P>>, grid,
                                dim3(kThreads), 0, stream, norm_args);
    }
    return table_or_scale ? LaunchProgrammatic(RopeKvWriteVec8Kernel<T, true, RopeKvArgs<T, P>>,
                                               grid, dim3(kThreads), 0, stream, args)
                          : LaunchProgrammatic(RopeKvWriteVec8Kernel<T, false, RopeKvArgs<T, P>>,
                                               grid, dim3(kThreads), 0, stream, args);
  }
  const dim3 grid(static_cast<unsigned>(num_tokens), WorkBlocks(num_heads, shape));
  return table_or_scale ? LaunchProgrammatic(RopeKvWriteKernel<T, true, P>, grid, dim3(kThreads), 0,
                                             stream, args)
                        : LaunchProgrammatic(RopeKvWriteKernel<T, false, P>, grid, dim3(kThreads),
                                             0, stream, args);
}

// RopeKvWrite's checks; sets *vec8 to whether the vector kernel runs.
cudaError_t CheckRopeKvWrite(const void* q, const void* k, const void* v, std::int64_t token_stride,
                             std::int64_t num_heads, const void* k_pool, const void* v_pool,
                             const PagedBatch& batch, const PagedKvShape& shape,
                             const RopeTable& rope, const QkNormWeights& qk_norm, bool* vec8) {
  if (batch.num_tokens < 0 || batch.num_seqs <= 0 || shape.head_dim <= 0 ||
      shape.head_dim % 2 != 0 || shape.num_kv_heads <= 0 || shape.tokens_per_block <= 0 ||
      num_heads <= 0 || (rope.seq_stride != 0 && rope.seq_stride != shape.head_dim / 2)) {
    return cudaErrorInvalidValue;
  }
  *vec8 = shape.head_dim % 16 == 0 && shape.head_dim / 16 <= kThreads && token_stride % 8 == 0 &&
          Aligned16(q) && Aligned16(k) && Aligned16(v) && Aligned16(k_pool) && Aligned16(v_pool);
  // The norm lives in the vector kernel's rotation, its head's threads in one warp.
  if (qk_norm.enabled() &&
      (!*vec8 || rope.inv_freq == nullptr || shape.head_dim > 512 || qk_norm.k == nullptr ||
       !Aligned16(qk_norm.q) || !Aligned16(qk_norm.k) || !(qk_norm.eps >= 0.0f))) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t RopeKvWrite(void* q, void* k, void* v, std::int64_t token_stride,
                        std::int64_t num_heads, void* k_pool, void* v_pool, const PagedBatch& batch,
                        const PagedKvShape& shape, const RopeTable& rope,
                        const QkNormWeights& qk_norm, DType dtype, cudaStream_t stream) {
  bool vec8 = false;
  const cudaError_t bad = CheckRopeKvWrite(q, k, v, token_stride, num_heads, k_pool, v_pool, batch,
                                           shape, rope, qk_norm, &vec8);
  if (bad != cudaSuccess) return bad;
  if (batch.num_tokens == 0) return cudaSuccess;
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    const RopeKvArgs<T> args{static_cast<T*>(q),
                             static_cast<T*>(k),
                             static_cast<T*>(v),
                             token_stride,
                             static_cast<int>(num_heads),
                             static_cast<T*>(k_pool),
                             static_cast<T*>(v_pool),
                             batch,
                             static_cast<int>(shape.num_kv_heads),
                             static_cast<int>(shape.tokens_per_block),
                             static_cast<int>(shape.head_dim),
                             rope.inv_freq,
                             rope.seq_stride,
                             rope.scale};
    return LaunchRopeKvWrite(args, vec8, qk_norm, shape, num_heads, rope, stream);
  });
  return cudaSuccess;
}

cudaError_t RopeKvWriteFp8(void* q, void* k, void* v, std::int64_t token_stride,
                           std::int64_t num_heads, void* k_pool, void* v_pool,
                           const PagedBatch& batch, const PagedKvShape& shape,
                           const RopeTable& rope, const QkNormWeights& qk_norm, DType dtype,
                           const KvFp8Scales& scales, cudaStream_t stream) {
  bool vec8 = false;
  const cudaError_t bad = CheckRopeKvWrite(q, k, v, token_stride, num_heads, k_pool, v_pool, batch,
                                           shape, rope, qk_norm, &vec8);
  if (bad != cudaSuccess) return bad;
  if (!scales.valid()) return cudaErrorInvalidValue;
  if (batch.num_tokens == 0) return cudaSuccess;
  INFLIGHT_DISPATCH_HALF(dtype, T, {
    const RopeKvArgs<T, Fp8Code> args{static_cast<T*>(q),
                                      static_cast<T*>(k),
                                      static_cast<T*>(v),
                                      token_stride,
                                      static_cast<int>(num_heads),
                                      static_cast<Fp8Code*>(k_pool),
                                      static_cast<Fp8Code*>(v_pool),
                                      batch,
                                      static_cast<int>(shape.num_kv_heads),
                                      static_cast<int>(shape.tokens_per_block),
                                      static_cast<int>(shape.head_dim),
                                      rope.inv_freq,
                                      rope.seq_stride,
                                      rope.scale,
                                      scales.k,
                                      scales.v};
    return LaunchRopeKvWrite(args, vec8, qk_norm, shape, num_heads, rope, stream);
  });
  return cudaSuccess;
}

}  // namespace inflight::kernels::cuda
