// Device building blocks of the sampling kernels (sampling.h), one thread block per logits row:
// row scans, the sampler's token order as a 64-bit key, radix selection of the top-k and top-p
// boundaries, fixed-point probability sums, and the inverse-CDF draw. Internal to
// src/kernels/cuda.
//
// Every function is called by all kThreads threads of the block (they synchronise). A `Load` is a
// functor `float operator()(int id) const` giving the logit the sampler sees for token `id`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
namespace inflight::kernels::cuda::sampling_detail {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // row loads in flight per thread
constexpr unsigned kFullMask = 0xffffffffu;
// The largest vocabulary the row loops index with int (ids + kUnroll * kThreads stay < 2^31).
constexpr std::int64_t kMaxVocab = std::int64_t{1} << 30;

using Mass = unsigned long long;

// Calls fn(id, load(id), valid) for every id of [0, vocab) with kUnroll loads in flight. Every
// lane of a warp makes the same calls (valid is false past the end), so fn may use warp intrinsics.
template <typename Load, typename Fn>
__device__ __forceinline__ void ForEachId(int vocab, const Load& load, Fn&& fn) {
  using Value = decltype(load(0));
  for (int base = 0; base < vocab; base += kUnroll * kThreads) {
    Value v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * kThreads + static_cast<int>(threadIdx.x);
      v[u] = i < vocab ? load(i) : Value{};
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * kThreads + static_cast<int>(threadIdx.x);
      fn(i, v[u], i < vocab);
    }
  }
}

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

// Folds one logit into a thread's running best; NaN and +inf are not candidates but flag the row
// as not finite (sampling::Sample refuses such rows).
__device__ __forceinline__ void FoldLogit(Best* best, bool* bad, int id, float z) {
  if (isnan(z) || (isinf(z) && z > 0.0f)) {
    *bad = true;
  } else {
    *best = Better(*best, Best{z, id});
  }
}

__device__ __forceinline__ Best WarpBest(Best b) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Best o{__shfl_xor_sync(kFullMask, b.value, offset),
                 __shfl_xor_sync(kFullMask, b.id, offset)};
    b = Better(b, o);
  }
  return b;
}

// The block's best (value, id): larger value, then lower id; id -1 when nothing was seen. Every
// thread gets the result.
__device__ __forceinline__ Best BlockBest(Best b) {
  __shared__ Best scratch[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  b = WarpBest(b);
  __syncthreads();  // NOTE: scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  return WarpBest(lane < kWarps ? scratch[lane] : Best{0.0f, -1});
}

__device__ __forceinline__ Mass WarpSumMass(Mass v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Sum over the block; every thread gets the result.
__device__ __forceinline__ Mass BlockSumMass(Mass v) {
  __shared__ Mass scratch[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpSumMass(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return WarpSumMass(lane < kWarps ? scratch[lane] : 0ull);
}

// Largest value over the block; every thread gets the result.
__device__ __forceinline__ int BlockMaxInt(int v) {
  __shared__ int scratch[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_xor_sync(kFullMask, v, offset));
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kWarps ? scratch[lane] : -1;
  for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// A 64-bit key whose unsigned order is the sampler's token order (top_k_top_p.h): the float's bits
// made monotonic in the high half, the complemented id in the low half (equal values: lower id is
// larger). -0 counts as +0, as the host's float comparison does.
__device__ __forceinline__ unsigned long long OrderKey(float z, int id) {
  unsigned bits = __float_as_uint(z == 0.0f ? 0.0f : z);
  bits = (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
  return (static_cast<unsigned long long>(bits) << 32) |
         static_cast<unsigned long long>(0xffffffffu - static_cast<unsigned>(id));
}

// The logit of an OrderKey (-0 comes back as +0, which has the same probability).
__device__ __forceinline__ float ZOfKey(unsigned long long key) {
  unsigned bits = static_cast<unsigned>(key >> 32);
  bits = (bits & 0x80000000u) != 0 ? (bits & 0x7fffffffu) : ~bits;
  return __uint_as_float(bits);
}

// Key sources for the radix selections: `unsigned long long operator()(int i) const` gives the
// OrderKey of entry i. RowKeys reads a whole row; CandidateKeys the keys gathered into shared
// memory (in any order: the selections only count and add).
template <typename Load>
struct RowKeys {
  Load load;
  __device__ unsigned long long operator()(int i) const { return OrderKey(load(i), i); }
};

struct CandidateKeys {
  const unsigned long long* keys;
  __device__ unsigned long long operator()(int i) const { return keys[i]; }
};

// Probabilities as fixed-point integers: p = exp(z - z_max) in (0, 1] times 2^bits, rounded. bits =
// 62 - bit_width(vocab), so a whole row sums below 2^62 and integer sums are exact and independent
// of the order of addition; one unit is 2^-bits of the most probable token (2^-45 at a 128k
// vocabulary), far below float rounding of the probabilities themselves.
struct MassScale {
  float scale;  // 2^bits, exactly
  int bits;
};

__host__ __device__ inline MassScale MakeMassScale(std::int64_t vocab) {
  int width = 0;
  while ((std::int64_t{1} << width) <= vocab) ++width;
  const int bits = 62 - width;
  float scale = 1.0f;
  for (int i = 0; i < bits; ++i) scale *= 2.0f;
  return MassScale{scale, bits};
}

__device__ __forceinline__ Mass ToMass(float z, float z_max, MassScale s) {
  return __float2ull_rn(expf(z - z_max) * s.scale);
}

// log of the sum of exp(z - z_max) that `mass` stands for, plus z_max: a log-sum-exp in double.
__device__ __forceinline__ double LogSumExpOf(float z_max, Mass mass, MassScale s) {
  return static_cast<double>(z_max) +
         (log(static_cast<double>(mass)) - static_cast<double>(s.bits) * 0.69314718055994530942);
}

// A histogram bin of masses: two 32-bit words, value = hi * 2^32 + lo. NOTE: 64-bit atomic adds
// on shared memory are compare-and-swap loops in hardware, 32-bit ones are native; the add that
// wraps lo carries into hi, so the pair sums exactly.
__device__ __forceinline__ void AddMass(unsigned* lo, unsigned* hi, Mass v) {
  const auto v_lo = static_cast<unsigned>(v);
  const unsigned old = atomicAdd(lo, v_lo);
  const unsigned to_hi = static_cast<unsigned>(v >> 32) + (old + v_lo < old ? 1u : 0u);
  if (to_hi != 0) atomicAdd(hi, to_hi);
}

__device__ __forceinline__ Mass MassOf(const unsigned* lo, const unsigned* hi, int bin) {
  return (static_cast<Mass>(hi[bin]) << 32) | lo[bin];
}

// Adds one per lane to count[digit] and, with kWithMass, `mass` to bin `digit` of (mass_lo,
// mass_hi); digit < 0 adds nothing. Called by every lane of the warp. When the warp's lanes fall
// in few digits (the first radix pass over real logits: a handful of exponents) each digit takes
// one atomic per warp instead of one per lane, so same-address atomics do not serialise the pass.
template <bool kWithMass>
__device__ __forceinline__ void AddToHistogram(unsigned* count, unsigned* mass_lo,
                                               unsigned* mass_hi, int digit, Mass mass) {
  constexpr int kMaxGroups = 4;
  const int lane = threadIdx.x & 31;
  const unsigned peers = __match_any_sync(kFullMask, digit);
  const bool leads = digit >= 0 && __ffs(peers) - 1 == lane;
  const unsigned leaders = __ballot_sync(kFullMask, leads);
  if (__popc(leaders) > kMaxGroups) {
    if (digit >= 0) {
      atomicAdd(&count[digit], 1u);
      if (kWithMass) AddMass(&mass_lo[digit], &mass_hi[digit], mass);
    }
    return;
  }
  for (unsigned todo = leaders; todo != 0; todo &= todo - 1) {
    const int leader = __ffs(todo) - 1;
    const int d = __shfl_sync(kFullMask, digit, leader);
    const bool mine = digit == d;
    const unsigned n = __popc(__ballot_sync(kFullMask, mine));
    Mass sum = 0;
    if (kWithMass) {
      // __reduce_add_sync adds 32-bit values: three 21-bit limbs of < 2^62 never carry out of 32
      // bits over 32 lanes.
      const Mass v = mine ? mass : 0ull;
      const unsigned lo = __reduce_add_sync(kFullMask, static_cast<unsigned>(v & 0x1fffffull));
      const unsigned mid =
          __reduce_add_sync(kFullMask, static_cast<unsigned>((v >> 21) & 0x1fffffull));
      const unsigned hi = __reduce_add_sync(kFullMask, static_cast<unsigned>(v >> 42));
      sum = static_cast<Mass>(lo) + (static_cast<Mass>(mid) << 21) + (static_cast<Mass>(hi) << 42);
    }
    if (lane == leader) {
      atomicAdd(&count[d], n);
      if (kWithMass) AddMass(&mass_lo[d], &mass_hi[d], sum);
    }
  }
}

// Radix-pass digit choice by warp 0, in place of a serial 256-step scan by one thread: lane l owns
// digits 255 - 8l down to 248 - 8l, so a scan over the lanes' sums in lane order walks the digits
// from the top.
__device__ __forceinline__ Mass WarpInclusiveSum(Mass v) {
  const int lane = threadIdx.x & 31;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const Mass o = __shfl_up_sync(kFullMask, v, offset);
    if (lane >= offset) v += o;
  }
  return v;
}

// The key of the k-th largest of n keys (1-based, 1 <= k <= n): an 8-pass radix select over the
// key's bytes, stopping early once the k-th key's whole bucket is kept (keys >= the returned
// prefix are then exactly the top k).
template <typename Keys>
__device__ unsigned long long KthLargestKey(const Keys& keys, int n, int k) {
  __shared__ unsigned count[256];
  __shared__ unsigned long long s_prefix;
  __shared__ unsigned s_remaining;
  __shared__ int s_done;
  unsigned long long prefix = 0, mask = 0;
  unsigned remaining = static_cast<unsigned>(k);
  for (int shift = 56; shift >= 0; shift -= 8) {
    if (threadIdx.x < 256) count[threadIdx.x] = 0;
    __syncthreads();
    ForEachId(n, keys, [&](int, unsigned long long key, bool valid) {
      const int digit =
          valid && (key & mask) == prefix ? static_cast<int>((key >> shift) & 0xff) : -1;
      AddToHistogram<false>(count, nullptr, nullptr, digit, 0ull);
    });
    __syncthreads();
    if (threadIdx.x < 32) {
      // The first digit from the top at which the running count reaches `remaining` (digit 0
      // when nothing does, as the serial scan did).
      const int lane = threadIdx.x;
      Mass local = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) local += count[255 - 8 * lane - j];
      const Mass inclusive = WarpInclusiveSum(local);
      const unsigned crossing = __ballot_sync(kFullMask, inclusive >= remaining || lane == 31);
      if (lane == __ffs(crossing) - 1) {
        Mass above = inclusive - local;
        int d = 255 - 8 * lane;
        for (;; --d) {
          if (above + count[d] >= remaining || d == 0) break;
          above += count[d];
        }
        const unsigned left = remaining - static_cast<unsigned>(above);
        s_prefix = prefix | (static_cast<unsigned long long>(d) << shift);
        s_remaining = left;
        s_done = left == count[d];
      }
    }
    __syncthreads();
    prefix = s_prefix;
    remaining = s_remaining;
    mask |= 0xffull << shift;
    if (s_done) break;
  }
  return prefix;
}

// Among the n keys >= floor_key, the largest key t such that the mass of keys >= t reaches
// `target`: the smallest most-probable prefix whose mass is >= target ends at t. A radix select
// over the key's bytes on fixed-point masses; it stops early once the boundary bucket holds one
// key. Precondition: target <= the mass of keys >= floor_key.
template <typename Keys>
__device__ unsigned long long TopPKey(const Keys& keys, int n, float z_max, MassScale scale,
                                      unsigned long long floor_key, double target) {
  __shared__ unsigned count[256], mass_lo[256], mass_hi[256];
  __shared__ unsigned long long s_prefix;
  __shared__ Mass s_above;
  __shared__ int s_done;
  unsigned long long prefix = 0, mask = 0;
  Mass above = 0;  // mass of the kept keys above the current bucket
  for (int shift = 56; shift >= 0; shift -= 8) {
    if (threadIdx.x < 256) {
      count[threadIdx.x] = 0;
      mass_lo[threadIdx.x] = 0;
      mass_hi[threadIdx.x] = 0;
    }
    __syncthreads();
    ForEachId(n, keys, [&](int, unsigned long long key, bool valid) {
      const bool in = valid && key >= floor_key && (key & mask) == prefix;
      AddToHistogram<true>(count, mass_lo, mass_hi,
                           in ? static_cast<int>((key >> shift) & 0xff) : -1,
                           in ? ToMass(ZOfKey(key), z_max, scale) : 0ull);
    });
    __syncthreads();
    if (threadIdx.x < 32) {
      // The first non-empty digit from the top at which the running mass reaches the target.
      // Running sums only grow and so do their doubles: the first lane whose sum gets there holds
      // that digit.
      const int lane = threadIdx.x;
      Mass local = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) local += MassOf(mass_lo, mass_hi, 255 - 8 * lane - j);
      const Mass inclusive = WarpInclusiveSum(local);
      const unsigned crossing =
          __ballot_sync(kFullMask, static_cast<double>(above + inclusive) >= target);
      // NOTE: exact integer sums reach the target by the precondition; when rounding of the
      // double comparison says otherwise, keep everything left: the lowest non-empty digit.
      const unsigned nonempty = __ballot_sync(kFullMask, local != 0);
      const int picker = crossing != 0   ? __ffs(crossing) - 1
                         : nonempty != 0 ? 31 - __clz(nonempty)
                                         : 31;
      if (lane == picker) {
        Mass a = above + inclusive - local;
        int chosen = -1, lowest = 0;
        Mass above_lowest = a;
        for (int d = 255 - 8 * lane; d > 247 - 8 * lane; --d) {
          const Mass m = MassOf(mass_lo, mass_hi, d);
          if (m == 0) continue;
          lowest = d;
          above_lowest = a;
          if (static_cast<double>(a + m) >= target) {
            chosen = d;
            break;
          }
          a += m;
        }
        if (chosen < 0) {
          chosen = lowest;
          a = above_lowest;
        }
        s_prefix = prefix | (static_cast<unsigned long long>(chosen) << shift);
        s_above = a;
        s_done = count[chosen] <= 1;
      }
    }
    __syncthreads();
    prefix = s_prefix;
    above = s_above;
    mask |= 0xffull << shift;
    if (s_done) break;
  }
  // An early stop leaves the low bits 0, which could reach below floor_key: the bucket's one key
  // counted is the only one >= floor_key in it.
  return prefix > floor_key ? prefix : floor_key;
}

// Sum of the masses of the n keys >= floor_key.
template <typename Keys>
__device__ Mass KeptMass(const Keys& keys, int n, float z_max, MassScale scale,
                         unsigned long long floor_key) {
  Mass sum = 0;
  ForEachId(n, keys, [&](int, unsigned long long key, bool valid) {
    if (valid && key >= floor_key) sum += ToMass(ZOfKey(key), z_max, scale);
  });
  return BlockSumMass(sum);
}

// The exclusive prefix sum of v over the block in thread order; *total gets the block's sum.
__device__ __forceinline__ Mass BlockExclusiveSum(Mass v, Mass* total) {
  __shared__ Mass warp_prefix[kWarps];
  __shared__ Mass s_total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  Mass inclusive = v;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const Mass o = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset) inclusive += o;
  }
  __syncthreads();  // NOTE: warp_prefix may still be read by a previous call
  if (lane == 31) warp_prefix[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const Mass w = lane < kWarps ? warp_prefix[lane] : 0ull;
    Mass w_inclusive = w;
    for (int offset = 1; offset < 32; offset <<= 1) {
      const Mass o = __shfl_up_sync(kFullMask, w_inclusive, offset);
      if (lane >= offset) w_inclusive += o;
    }
    if (lane < kWarps) warp_prefix[lane] = w_inclusive - w;
    if (lane == 31) s_total = w_inclusive;
  }
  __syncthreads();
  *total = s_total;
  return warp_prefix[warp] + inclusive - v;
}

// The inverse-CDF draw over the kept tokens (key >= floor_key, mass > 0) in ascending id order: the
// first id at which the running mass exceeds `target`. When rounding leaves the target at or past
// the total, the last kept id, as DrawFromLogits does.
template <typename Load>
__device__ int DrawKept(const Load& load, int vocab, float z_max, MassScale scale,
                        unsigned long long floor_key, double target) {
  constexpr int kItems = 4;  // consecutive ids per thread and chunk
  __shared__ int s_found;
  if (threadIdx.x == 0) s_found = -1;
  // (BlockExclusiveSum synchronises before anyone reads s_found.)
  Mass running = 0;  // mass of the chunks before this one
  for (int base = 0; base < vocab; base += kItems * kThreads) {
    const int first = base + kItems * static_cast<int>(threadIdx.x);
    Mass m[kItems];
    Mass mine = 0;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      m[j] = 0;
      const int i = first + j;
      if (i < vocab) {
        const float z = load(i);
        if (OrderKey(z, i) >= floor_key) m[j] = ToMass(z, z_max, scale);
      }
      mine += m[j];
    }
    Mass chunk_total;
    Mass before = running + BlockExclusiveSum(mine, &chunk_total);
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      // Exactly one token has its running mass step over the target.
      if (m[j] > 0 && static_cast<double>(before) <= target &&
          static_cast<double>(before + m[j]) > target) {
        s_found = first + j;
      }
      before += m[j];
    }
    __syncthreads();
    if (s_found >= 0) return s_found;
    running += chunk_total;
  }
  int last = -1;
  ForEachId(vocab, load, [&](int i, float z, bool valid) {
    if (valid && OrderKey(z, i) >= floor_key && ToMass(z, z_max, scale) > 0) last = max(last, i);
  });
  return BlockMaxInt(last);
}

}  // namespace inflight::kernels::cuda::sampling_detail
