// SampleRows (sampling.h): the logits processors rewrite the row in place, then the shared
// row sampler (sampling_row.cuh) picks the token and its log-probability.
#include <cooperative_groups.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sampling_row.cuh"

namespace inflight::kernels::cuda {
namespace {

using namespace sampling_detail;  // NOLINT(build/namespaces): this file's own building blocks

static_assert(kSampledNotFinite == kRowNotFinite && kSampledAllBanned == kRowAllBanned);

struct RowLoad {
  const float* row;  // NOTE: written earlier by this block, so plain loads (not the read-only path)
  __device__ float operator()(int i) const { return row[i]; }
};

// sampling::ApplyLogitsProcessors on ids [lo, hi) of one row, in place, with the same float
// operations in the same order per token (explicit _rn intrinsics: nvcc must not fuse a multiply
// and a subtract into one FMA, which the host does not do). Ends with the block synchronised.
__device__ void ApplyLogitsProcessors(float* row, int lo, int hi, const SamplingParams& p,
                                      const std::int32_t* lists) {
  const float* bias = p.embedding_bias;
  const bool temper = p.temperature > 0.0f && p.temperature != 1.0f;
  if (bias != nullptr || temper) {
    for (int i = lo + static_cast<int>(threadIdx.x); i < hi; i += kThreads) {
      float l = row[i];
      if (bias != nullptr) l = __fadd_rn(l, bias[i]);
      if (temper) l = __fdiv_rn(l, p.temperature);
      row[i] = l;
    }
    __syncthreads();
  }
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool presence = p.presence_penalty != 0.0f;
  const bool frequency = p.frequency_penalty != 0.0f;
  if (repetition || presence || frequency) {
    // The listed tokens are distinct: one thread owns each, so its stages apply in order.
    const std::int32_t* pairs = lists + p.penalty_offset;
    for (int j = threadIdx.x; j < p.num_penalty_tokens; j += kThreads) {
      const int t = pairs[2 * j];
      const int generated = pairs[2 * j + 1];
      if (t < lo || t >= hi) continue;
      float l = row[t];
      if (repetition) {
        l = l > 0.0f ? __fdiv_rn(l, p.repetition_penalty) : __fmul_rn(l, p.repetition_penalty);
      }
      if (generated > 0) {
        if (presence) l = __fsub_rn(l, p.presence_penalty);
        if (frequency) {
          l = __fsub_rn(l, __fmul_rn(__int2float_rn(generated), p.frequency_penalty));
        }
      }
      row[t] = l;
    }
    __syncthreads();
  }
  if (p.num_banned > 0) {
    const std::int32_t* banned = lists + p.ban_offset;
    for (int j = threadIdx.x; j < p.num_banned; j += kThreads) {
      const int t = banned[j];
      if (t >= lo && t < hi) row[t] = -INFINITY;
    }
    __syncthreads();
  }
}

__device__ RowChoice ChoiceOf(const SamplingParams& p) {
  RowChoice c;
  c.greedy = p.greedy != 0;
  c.top_k = p.top_k;
  c.top_p = p.top_p;
  c.uniform = p.uniform;
  c.normalize_log_prob = p.normalize_log_prob != 0;
  return c;
}

// Grid: (num_rows), Block: (kThreads).
__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(std::int32_t* out_ids, float* out_log_probs, float* logits, int vocab,
                     std::int64_t row_stride, const SamplingParams* params,
                     const std::int32_t* lists, MassScale scale, int max_candidates) {
  GridDependencyWait();
  GridDependencyLaunchDependents();
  const int r = blockIdx.x;
  float* row = logits + r * row_stride;
  const SamplingParams p = params[r];
  ApplyLogitsProcessors(row, 0, vocab, p, lists);
  extern __shared__ __align__(16) unsigned char select_shared[];
  SampleRow(RowLoad{row}, vocab, ChoiceOf(p), scale, select_shared, max_candidates, out_ids + r,
            out_log_probs != nullptr ? out_log_probs + r : nullptr);
}

// A few rows (a small decode batch): one block per row leaves most SMs idle while it scans 128k
// logits twice (~22 us at batch 1). Here a cluster of kClusterBlocks blocks shares each row: every
// block processes and scans a slice, and the blocks combine their partial results through
// distributed shared memory. Greedy rows finish in the cluster; sampled rows (radix selection over
// the whole row) are then sampled by the cluster's first block, as SampleRowsKernel does. The
// fixed-point probability sums are exact, so the result is the same bit for bit.
constexpr int kClusterBlocks = 8;             // the portable cluster size
constexpr std::int64_t kMaxClusterRows = 16;  // 128 blocks: about one per SM of an H100

// A block's slice [lo, hi) of a row for the cluster kernel's two scans (best, then mass). A slice
// of up to kHeldVectors x 4 x kThreads logits (8 x 16384 covers a 128k vocabulary) is loaded once,
// 16 bytes at a time with every load of a thread in flight together, and held in registers; a
// larger or unaligned slice is read twice through ForEachId. The row was written by this block
// (the processors), so plain loads.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // used by the cluster kernel alone
struct SliceLogits {
  static constexpr int kHeldVectors = 4;
  float4 held[kHeldVectors];
  const float* base;
  int lo, n;
  bool in_registers;

  __device__ __forceinline__ void Load(const float* row, int slice_lo, int slice_hi) {
    lo = slice_lo;
    n = slice_hi - slice_lo;
    base = row + lo;
    in_registers = n <= kHeldVectors * 4 * kThreads &&
                   reinterpret_cast<std::uintptr_t>(base) % sizeof(float4) == 0;
    if (!in_registers) return;
#pragma unroll
    for (int k = 0; k < kHeldVectors; ++k) {
      const int i = (k * kThreads + static_cast<int>(threadIdx.x)) * 4;
      if (i + 3 < n) {
        held[k] = *reinterpret_cast<const float4*>(base + i);
      } else {
        held[k] = make_float4(i < n ? base[i] : 0.0f, i + 1 < n ? base[i + 1] : 0.0f,
                              i + 2 < n ? base[i + 2] : 0.0f, 0.0f);
      }
    }
  }

  // fn(id, logit) for every id of the slice.
  template <typename Fn>
  __device__ __forceinline__ void ForEach(Fn&& fn) const {
    if (!in_registers) {
      ForEachId(n, RowLoad{base}, [&](int i, float z, bool valid) {
        if (valid) fn(lo + i, z);
      });
      return;
    }
#pragma unroll
    for (int k = 0; k < kHeldVectors; ++k) {
      const int i = (k * kThreads + static_cast<int>(threadIdx.x)) * 4;
      const float z[4] = {held[k].x, held[k].y, held[k].z, held[k].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (i + j < n) fn(lo + i + j, z[j]);
      }
    }
  }
};

#endif

// Grid: (kClusterBlocks, num_rows) in clusters of (kClusterBlocks, 1, 1), Block: (kThreads).
__global__ void __launch_bounds__(kThreads)
    SampleRowsClusterKernel(std::int32_t* out_ids, float* out_log_probs, float* logits, int vocab,
                            std::int64_t row_stride, const SamplingParams* params,
                            const std::int32_t* lists, MassScale scale, int max_candidates) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  GridDependencyWait();
  GridDependencyLaunchDependents();
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int r = blockIdx.y;
  float* row = logits + r * row_stride;
  const SamplingParams p = params[r];
  const int slice = static_cast<int>(CeilDiv(CeilDiv(vocab, kClusterBlocks), 32) * 32);
  const int lo = min(vocab, rank * slice), hi = min(vocab, lo + slice);
  ApplyLogitsProcessors(row, lo, hi, p, lists);
  if (p.greedy == 0) {
    __threadfence();  // the slices' writes, before the first block reads the whole row
    cluster.sync();
    if (rank == 0) {
      extern __shared__ __align__(16) unsigned char select_shared[];
      SampleRow(RowLoad{row}, vocab, ChoiceOf(p), scale, select_shared, max_candidates, out_ids + r,
                out_log_probs != nullptr ? out_log_probs + r : nullptr);
    }
    return;
  }

  __shared__ Best slice_best, row_best;
  __shared__ int slice_bad, row_bad;
  __shared__ Mass slice_mass;
  SliceLogits slice_logits;
  slice_logits.Load(row, lo, hi);
  Best best{0.0f, -1};
  bool bad = false;
  slice_logits.ForEach([&](int id, float z) { FoldLogit(&best, &bad, id, z); });
  const bool block_bad = __syncthreads_or(bad) != 0;
  best = BlockBest(best);
  if (threadIdx.x == 0) {
    slice_best = best;
    slice_bad = block_bad ? 1 : 0;
  }
  cluster.sync();
  if (threadIdx.x == 0) {
    Best all{0.0f, -1};
    int any_bad = 0;
    for (int b = 0; b < kClusterBlocks; ++b) {
      all = Better(all, *cluster.map_shared_rank(&slice_best, b));
      any_bad |= *cluster.map_shared_rank(&slice_bad, b);
    }
    row_best = all;
    row_bad = any_bad;
  }
  __syncthreads();
  const Best top = row_best;
  if (row_bad != 0 || top.id < 0 || isinf(top.value)) {
    cluster.sync();  // NOTE: no block may leave while another still reads its shared memory
    if (rank == 0 && threadIdx.x == 0) {
      out_ids[r] = row_bad != 0 ? kRowNotFinite : kRowAllBanned;
      if (out_log_probs != nullptr) out_log_probs[r] = __int_as_float(0x7fc00000);
    }
    return;
  }
  Mass mass = 0;
  slice_logits.ForEach([&](int, float z) { mass += ToMass(z, top.value, scale); });
  mass = BlockSumMass(mass);
  if (threadIdx.x == 0) slice_mass = mass;
  cluster.sync();
  if (rank == 0 && threadIdx.x == 0) {
    Mass total = 0;
    for (int b = 0; b < kClusterBlocks; ++b) total += *cluster.map_shared_rank(&slice_mass, b);
    out_ids[r] = top.id;
    if (out_log_probs != nullptr) {
      out_log_probs[r] =
          static_cast<float>(static_cast<double>(top.value) - LogSumExpOf(top.value, total, scale));
    }
  }
  cluster.sync();  // NOTE: the first block has read every slice's mass
#else
  // Launched only on sm_90 and later (SampleRows checks the device).
  (void)out_ids, (void)out_log_probs, (void)logits, (void)vocab, (void)row_stride, (void)params,
      (void)lists, (void)scale, (void)max_candidates;
#endif
}

}  // namespace

cudaError_t SampleRows(std::int32_t* out_ids, float* out_log_probs, float* logits,
                       std::int64_t num_rows, std::int64_t vocab, std::int64_t row_stride,
                       const SamplingParams* params, const std::int32_t* lists,
                       cudaStream_t stream) {
  if (num_rows < 0 || num_rows > 0x7fffffff || vocab <= 0 || vocab > kMaxVocab ||
      row_stride < vocab || out_ids == nullptr || logits == nullptr || params == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (num_rows == 0) return cudaSuccess;
  // NOTE: a launch reserves the dynamic shared memory for every row, greedy ones included: which
  // rows sample is known only on the device.
  const int max_candidates = MaxCandidatesOnDevice();
  const auto shared_bytes = static_cast<unsigned>(max_candidates) * sizeof(unsigned long long);
  // Clusters and programmatic launch both arrive with sm_90.
  if (num_rows <= kMaxClusterRows && CurrentDeviceIsSm90OrLater()) {
    const ClusterLaunch launch(dim3(kClusterBlocks, static_cast<unsigned>(num_rows)),
                               dim3(kThreads), shared_bytes, stream, kClusterBlocks);
    const cudaError_t set =
        cudaFuncSetAttribute(SampleRowsClusterKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared_bytes));
    if (set != cudaSuccess) return set;
    return cudaLaunchKernelEx(&launch.config, SampleRowsClusterKernel, out_ids, out_log_probs,
                              logits, static_cast<int>(vocab), row_stride, params, lists,
                              MakeMassScale(vocab), max_candidates);
  }
  const cudaError_t set =
      cudaFuncSetAttribute(SampleRowsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(shared_bytes));
  if (set != cudaSuccess) return set;
  return LaunchProgrammatic(SampleRowsKernel, dim3(static_cast<unsigned>(num_rows)), dim3(kThreads),
                            shared_bytes, stream, out_ids, out_log_probs, logits,
                            static_cast<int>(vocab), row_stride, params, lists,
                            MakeMassScale(vocab), max_candidates);
}

}  // namespace inflight::kernels::cuda
