#include "kernels/cuda/sampling.h"

#include <cub/block/block_scan.cuh>

#include "kernels/cuda/cuda_common.cuh"

namespace inflight::kernels::cuda {
namespace {

constexpr int kThreads = 1024;

struct Best {
  float value;
  int id;
};

__device__ __forceinline__ Best Better(Best a, Best b) {
  if (b.id < 0) return a;
  if (a.id < 0) return b;
  if (a.value != b.value) return a.value > b.value ? a : b;
  return a.id < b.id ? a : b;
}

// The block's best (value, id): larger value, then lower id; id -1 when nothing was seen.
__device__ Best BlockBest(Best b) {
  __shared__ Best scratch[32];
  for (int offset = 16; offset > 0; offset >>= 1) {
    Best o{__shfl_xor_sync(0xffffffffu, b.value, offset),
           __shfl_xor_sync(0xffffffffu, b.id, offset)};
    b = Better(b, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  b = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : Best{0.0f, -1};
  for (int offset = 16; offset > 0; offset >>= 1) {
    Best o{__shfl_xor_sync(0xffffffffu, b.value, offset),
           __shfl_xor_sync(0xffffffffu, b.id, offset)};
    b = Better(b, o);
  }
  return b;
}

__device__ Best RowArgMax(const float* row, int vocab) {
  Best b{0.0f, -1};
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = row[i];
    if (!isnan(v)) b = Better(b, Best{v, i});
  }
  return BlockBest(b);
}

// Grid: (num_rows), Block: (kThreads).
__global__ void __launch_bounds__(kThreads)
    ArgMaxKernel(std::int32_t* out_ids, const float* logits, int vocab, std::int64_t row_stride) {
  const Best b = RowArgMax(logits + blockIdx.x * row_stride, vocab);
  if (threadIdx.x == 0) out_ids[blockIdx.x] = b.id < 0 ? 0 : b.id;
}

// A 64-bit key whose unsigned order is the sampler's token order: the float's bits made monotonic
// in the high half, the complemented id in the low half (equal values: lower id is larger).
__device__ __forceinline__ unsigned long long OrderKey(float z, int id) {
  unsigned bits = __float_as_uint(z);
  bits = (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
  return (static_cast<unsigned long long>(bits) << 32) |
         static_cast<unsigned long long>(0xffffffffu - static_cast<unsigned>(id));
}

// The key of the k-th largest entry (1-based) by an 8-pass radix select over the byte digits.
__device__ unsigned long long KthLargestKey(const float* row, int vocab, float inv_temp, int k) {
  __shared__ unsigned hist[256];
  __shared__ unsigned long long s_prefix;
  __shared__ unsigned s_remaining;
  unsigned long long prefix = 0, mask = 0;
  unsigned remaining = static_cast<unsigned>(k);
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const unsigned long long key = OrderKey(row[i] * inv_temp, i);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xff], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int d = 255;
      for (; d > 0; --d) {
        if (remaining <= hist[d]) break;
        remaining -= hist[d];
      }
      s_prefix = prefix | (static_cast<unsigned long long>(d) << shift);
      s_remaining = remaining;
    }
    __syncthreads();
    prefix = s_prefix;
    remaining = s_remaining;
    mask |= 0xffull << shift;
  }
  return prefix;
}

// Among keys >= floor_key (unnormalised probabilities p = exp(z - z_max)), the largest key t with
// mass(key >= t) >= target: the smallest top-p prefix ends at t.
__device__ unsigned long long TopPKey(const float* row, int vocab, float inv_temp, float z_max,
                                      unsigned long long floor_key, float target) {
  __shared__ float mass[256];
  __shared__ unsigned long long s_prefix;
  __shared__ float s_above;
  unsigned long long prefix = 0, mask = 0;
  float above = 0.0f;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) mass[i] = 0.0f;
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float z = row[i] * inv_temp;
      const unsigned long long key = OrderKey(z, i);
      if (key >= floor_key && (key & mask) == prefix) {
        atomicAdd(&mass[(key >> shift) & 0xff], expf(z - z_max));
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int chosen = -1, lowest_nonempty = 0;
      for (int d = 255; d >= 0; --d) {
        if (mass[d] > 0.0f) lowest_nonempty = d;
        if (mass[d] > 0.0f && above + mass[d] >= target) {
          chosen = d;
          break;
        }
        above += mass[d];
      }
      // NOTE: float rounding can leave the total a hair under target: then keep everything.
      if (chosen < 0) chosen = lowest_nonempty;
      s_prefix = prefix | (static_cast<unsigned long long>(chosen) << shift);
      s_above = above;
    }
    __syncthreads();
    prefix = s_prefix;
    above = s_above;
    mask |= 0xffull << shift;
  }
  return prefix;
}

// Grid: (num_rows), Block: (kThreads). Each row is scanned a bounded number of times (max, 8
// radix passes per truncation, two sums and one ordered prefix scan); nothing goes to the host.
__global__ void __launch_bounds__(kThreads)
    SampleKernel(std::int32_t* out_ids, const float* logits, int vocab, std::int64_t row_stride,
                 const float* temperature, const std::int32_t* top_k, const float* top_p,
                 const float* uniform) {
  using BlockScan = cub::BlockScan<float, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ int s_found;
  __shared__ int s_last_kept;

  const int r = blockIdx.x;
  const float* row = logits + r * row_stride;
  const float temp = temperature != nullptr ? temperature[r] : 1.0f;
  if (temp <= 0.0f) {
    const Best b = RowArgMax(row, vocab);
    if (threadIdx.x == 0) out_ids[r] = b.id < 0 ? 0 : b.id;
    return;
  }
  const float inv_temp = 1.0f / temp;
  const Best top = RowArgMax(row, vocab);  // argmax of z equals argmax of logits for temp > 0
  const float z_max = top.value * inv_temp;

  unsigned long long floor_key = 0;
  const int k = top_k != nullptr ? top_k[r] : 0;
  if (k > 0 && k < vocab) floor_key = KthLargestKey(row, vocab, inv_temp, k);

  float kept_mass = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float z = row[i] * inv_temp;
    if (OrderKey(z, i) >= floor_key) kept_mass += expf(z - z_max);
  }
  kept_mass = BlockSum(kept_mass);

  const float p = top_p != nullptr ? top_p[r] : 1.0f;
  if (p > 0.0f && p < 1.0f) {
    floor_key = TopPKey(row, vocab, inv_temp, z_max, floor_key, p * kept_mass);
    kept_mass = 0.0f;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float z = row[i] * inv_temp;
      if (OrderKey(z, i) >= floor_key) kept_mass += expf(z - z_max);
    }
    kept_mass = BlockSum(kept_mass);
  }

  // Inverse CDF in ascending id order, one chunk of kThreads ids at a time.
  const float target = uniform[r] * kept_mass;
  if (threadIdx.x == 0) {
    s_found = -1;
    s_last_kept = top.id < 0 ? 0 : top.id;
  }
  __syncthreads();
  float running = 0.0f;
  for (int base = 0; base < vocab; base += kThreads) {
    const int i = base + threadIdx.x;
    float pi = 0.0f;
    if (i < vocab) {
      const float z = row[i] * inv_temp;
      if (OrderKey(z, i) >= floor_key) pi = expf(z - z_max);
    }
    float inclusive, chunk_total;
    BlockScan(scan_storage).InclusiveSum(pi, inclusive, chunk_total);
    if (pi > 0.0f) {
      atomicMax(&s_last_kept, i);
      if (running + inclusive > target)
        atomicMin(reinterpret_cast<unsigned*>(&s_found), static_cast<unsigned>(i));
    }
    __syncthreads();
    if (s_found >= 0) break;
    running += chunk_total;
  }
  if (threadIdx.x == 0) out_ids[r] = s_found >= 0 ? s_found : s_last_kept;
}

}  // namespace

cudaError_t ArgMax(std::int32_t* out_ids, const float* logits, std::int64_t num_rows,
                   std::int64_t vocab, std::int64_t row_stride, cudaStream_t stream) {
  if (num_rows < 0 || num_rows > 0x7fffffff || vocab <= 0 || vocab > 0x7fffffff ||
      row_stride < vocab) {
    return cudaErrorInvalidValue;
  }
  if (num_rows == 0) return cudaSuccess;
  ArgMaxKernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(
      out_ids, logits, static_cast<int>(vocab), row_stride);
  return cudaGetLastError();
}

cudaError_t SampleTopKTopP(std::int32_t* out_ids, const float* logits, std::int64_t num_rows,
                           std::int64_t vocab, std::int64_t row_stride, const float* temperature,
                           const std::int32_t* top_k, const float* top_p, const float* uniform,
                           cudaStream_t stream) {
  if (num_rows < 0 || num_rows > 0x7fffffff || vocab <= 0 || vocab > 0x7fffffff ||
      row_stride < vocab || uniform == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (num_rows == 0) return cudaSuccess;
  SampleKernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(
      out_ids, logits, static_cast<int>(vocab), row_stride, temperature, top_k, top_p, uniform);
  return cudaGetLastError();
}

}  // namespace inflight::kernels::cuda
