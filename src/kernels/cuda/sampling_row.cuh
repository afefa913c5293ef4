// One logits row sampled by one thread block (sampling.h's kernels): the top-k / top-p boundary
// placed by a histogram pass, the candidates at and above it gathered into shared memory for the
// radix selections (sampling_select.cuh), then the draw and the log-probability. Internal to
// src/kernels/cuda.
#pragma once

#include "kernels/cuda/sampling_select.cuh"

namespace inflight::kernels::cuda::sampling_detail {

// Truncated rows (top-k, top-p) select on candidates: one pass over the row counts a histogram of
// the keys' top kBucketBits bits (with masses when top-p alone decides), which places the
// boundary in one bucket; the keys of that bucket and above are gathered into shared memory, and
// the byte-wise radix selections run there instead of re-reading the row (about 17 passes over
// the row become 3 and the draw). A row whose candidates overflow kMaxCandidates (a huge top-k, a
// flat distribution) takes the row-wide path; both give the same keys.
constexpr int kBucketBits = 12;
constexpr int kBuckets = 1 << kBucketBits;
constexpr int kBucketShift = 64 - kBucketBits;
constexpr int kMaxCandidates = 24576;
constexpr int kHistogramBytes = 3 * kBuckets * static_cast<int>(sizeof(unsigned));
// Room left for the static shared memory of the kernels that call SampleRow (about 9 KiB).
constexpr int kStaticSharedAllowance = 12 * 1024;
static_assert(kBuckets == 4 * kThreads, "the bucket scan gives each thread 4 buckets");

// How many candidates SampleRow may gather on the current device: up to kMaxCandidates within the
// device's opt-in shared memory per block; 0 (row-wide selections alone) when not even the bucket
// histogram fits. The kernels take max_candidates * 8 bytes of dynamic shared memory: the bucket
// histogram first, then the candidates' keys in the same bytes.
inline int MaxCandidatesOnDevice() {
  const int optin = CurrentDeviceAttribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  if (optin == 0) return 0;
  const int room = (optin - kStaticSharedAllowance) / static_cast<int>(sizeof(unsigned long long));
  const int n = room < kMaxCandidates ? room : kMaxCandidates;
  return n * static_cast<int>(sizeof(unsigned long long)) >= kHistogramBytes ? n : 0;
}

struct CandidateBound {
  int bucket;  // the lowest bucket kept; -1 when rounding found none (the row-wide path decides)
  Mass count;  // tokens in that bucket and above
};

// The bucket holding the k-th largest key (k > 0), or else the one where the running mass from the
// top reaches top_p * total; *total gets the row's mass. `histogram` is 3 * kBuckets words.
template <typename Load>
__device__ CandidateBound BoundCandidates(const Load& load, int vocab, float z_max, MassScale scale,
                                          int k, float top_p, unsigned* histogram, Mass* total) {
  unsigned* count = histogram;
  unsigned* mass_lo = count + kBuckets;
  unsigned* mass_hi = mass_lo + kBuckets;
  __shared__ int s_bucket;
  __shared__ Mass s_count;
  const bool by_mass = k <= 0;
  for (int i = threadIdx.x; i < 3 * kBuckets; i += kThreads) histogram[i] = 0;
  if (threadIdx.x == 0) s_bucket = -1;
  __syncthreads();
  Mass sum = 0;
  if (by_mass) {
    ForEachId(vocab, load, [&](int i, float z, bool valid) {
      const Mass m = valid ? ToMass(z, z_max, scale) : 0ull;
      sum += m;
      AddToHistogram<true>(count, mass_lo, mass_hi,
                           valid ? static_cast<int>(OrderKey(z, i) >> kBucketShift) : -1, m);
    });
  } else {
    ForEachId(vocab, load, [&](int i, float z, bool valid) {
      if (valid) sum += ToMass(z, z_max, scale);
      AddToHistogram<false>(count, nullptr, nullptr,
                            valid ? static_cast<int>(OrderKey(z, i) >> kBucketShift) : -1, 0ull);
    });
  }
  *total = BlockSumMass(sum);  // (synchronises: the histogram is complete)
  // Thread t owns buckets top - 0..3: thread order walks the buckets from the top.
  const int top = kBuckets - 1 - 4 * static_cast<int>(threadIdx.x);
  Mass local_count = 0, local_mass = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    local_count += count[top - j];
    if (by_mass) local_mass += MassOf(mass_lo, mass_hi, top - j);
  }
  Mass unused;
  Mass count_above = BlockExclusiveSum(local_count, &unused);
  if (by_mass) {
    const double target = static_cast<double>(top_p) * static_cast<double>(*total);
    Mass mass_above = BlockExclusiveSum(local_mass, &unused);
    // Running sums only grow: one thread holds the first bucket whose sum reaches the target.
    if (static_cast<double>(mass_above) < target &&
        static_cast<double>(mass_above + local_mass) >= target) {
      for (int j = 0; j < 4; ++j) {
        count_above += count[top - j];
        mass_above += MassOf(mass_lo, mass_hi, top - j);
        if (static_cast<double>(mass_above) >= target) {
          s_bucket = top - j;
          s_count = count_above;
          break;
        }
      }
    }
  } else {
    const Mass kk = static_cast<Mass>(k);
    if (count_above < kk && count_above + local_count >= kk) {
      for (int j = 0; j < 4; ++j) {
        count_above += count[top - j];
        if (count_above >= kk) {
          s_bucket = top - j;
          s_count = count_above;
          break;
        }
      }
    }
  }
  __syncthreads();
  return CandidateBound{s_bucket, s_bucket >= 0 ? s_count : 0ull};
}

// Gathers the keys of the row's tokens in `bucket` and above into keys[] (in no particular order)
// and returns how many there are.
template <typename Load>
__device__ int GatherCandidates(const Load& load, int vocab, int bucket, unsigned long long* keys) {
  __shared__ int s_n;
  if (threadIdx.x == 0) s_n = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  ForEachId(vocab, load, [&](int i, float z, bool valid) {
    const unsigned long long key = OrderKey(z, i);
    const bool in = valid && static_cast<int>(key >> kBucketShift) >= bucket;
    const unsigned in_lanes = __ballot_sync(kFullMask, in);
    if (in_lanes == 0) return;
    int base = 0;
    if (lane == 0) base = atomicAdd(&s_n, __popc(in_lanes));
    base = __shfl_sync(kFullMask, base, 0);
    if (in) keys[base + __popc(in_lanes & ((1u << lane) - 1u))] = key;
  });
  __syncthreads();
  return s_n;
}

// How one row is sampled once its logits are final.
struct RowChoice {
  bool greedy;
  int top_k;       // <= 0 or >= vocab: off
  float top_p;     // <= 0 or >= 1: off
  double uniform;  // [0, 1)
  bool normalize_log_prob;
};

// Error codes of SampleRow (sampling.h names them for callers).
constexpr int kRowNotFinite = -1;
constexpr int kRowAllBanned = -2;

template <typename Load>
__device__ void WriteSampled(const Load& load, int token, float z_max, Mass log_prob_mass,
                             MassScale scale, std::int32_t* out_id, float* out_log_prob) {
  if (threadIdx.x == 0) {
    *out_id = token;
    if (out_log_prob != nullptr) {
      const double z = static_cast<double>(load(token));
      *out_log_prob = static_cast<float>(z - LogSumExpOf(z_max, log_prob_mass, scale));
    }
  }
}

// The sampler (sampling::Sample after the logits processors) on one row: writes the token (or an
// error code) to *out_id and its log-probability (NaN on error) to *out_log_prob when not null.
// select_shared: max_candidates * 8 bytes of the block's shared memory, 8-byte aligned
// (MaxCandidatesOnDevice).
template <typename Load>
__device__ void SampleRow(const Load& load, int vocab, const RowChoice& c, MassScale scale,
                          unsigned char* select_shared, int max_candidates, std::int32_t* out_id,
                          float* out_log_prob) {
  Best best{0.0f, -1};
  bool bad = false;
  ForEachId(vocab, load, [&](int i, float z, bool valid) {
    if (valid) FoldLogit(&best, &bad, i, z);
  });
  const bool any_bad = __syncthreads_or(bad) != 0;
  best = BlockBest(best);
  if (any_bad || best.id < 0 || isinf(best.value)) {
    if (threadIdx.x == 0) {
      *out_id = any_bad ? kRowNotFinite : kRowAllBanned;
      if (out_log_prob != nullptr) *out_log_prob = __int_as_float(0x7fc00000);
    }
    return;
  }
  const float z_max = best.value;
  const int k = c.greedy ? 0 : c.top_k;
  const bool top_k_on = k > 0 && k < vocab;
  const bool top_p_on = !c.greedy && c.top_p > 0.0f && c.top_p < 1.0f;

  if ((top_k_on || top_p_on) && max_candidates > 0) {
    Mass total = 0;
    const CandidateBound bound =
        BoundCandidates(load, vocab, z_max, scale, top_k_on ? k : 0, c.top_p,
                        reinterpret_cast<unsigned*>(select_shared), &total);
    if (bound.bucket >= 0 && bound.count <= static_cast<Mass>(max_candidates)) {
      auto* keys = reinterpret_cast<unsigned long long*>(select_shared);
      const int n = GatherCandidates(load, vocab, bound.bucket, keys);
      const CandidateKeys candidates{keys};
      // Every candidate is >= lowest and every other token below it, so a floor key raised to
      // lowest keeps the same candidates and no other token.
      const unsigned long long lowest = static_cast<unsigned long long>(bound.bucket)
                                        << kBucketShift;
      unsigned long long floor_key = lowest;
      Mass kept = total;
      if (top_k_on) {
        const unsigned long long kth = KthLargestKey(candidates, n, k);
        floor_key = kth > lowest ? kth : lowest;
        kept = KeptMass(candidates, n, z_max, scale, floor_key);
      }
      if (top_p_on) {
        floor_key = TopPKey(candidates, n, z_max, scale, floor_key,
                            static_cast<double>(c.top_p) * static_cast<double>(kept));
        kept = KeptMass(candidates, n, z_max, scale, floor_key);
      }
      const int token =
          DrawKept(load, vocab, z_max, scale, floor_key, c.uniform * static_cast<double>(kept));
      WriteSampled(load, token, z_max, c.normalize_log_prob ? kept : total, scale, out_id,
                   out_log_prob);
      return;
    }
  }

  // Greedy, the full vocabulary, or too many candidates: selections over the whole row.
  const RowKeys<Load> row_keys{load};
  unsigned long long floor_key = 0;  // keep every token
  if (top_k_on) floor_key = KthLargestKey(row_keys, vocab, k);
  Mass total = 0, kept = 0;
  ForEachId(vocab, load, [&](int i, float z, bool valid) {
    if (!valid) return;
    const Mass m = ToMass(z, z_max, scale);
    total += m;
    if (OrderKey(z, i) >= floor_key) kept += m;
  });
  total = BlockSumMass(total);
  kept = BlockSumMass(kept);

  int token = best.id;
  Mass log_prob_mass = total;
  if (!c.greedy) {
    if (top_p_on) {
      floor_key = TopPKey(row_keys, vocab, z_max, scale, floor_key,
                          static_cast<double>(c.top_p) * static_cast<double>(kept));
      kept = KeptMass(row_keys, vocab, z_max, scale, floor_key);
    }
    token = DrawKept(load, vocab, z_max, scale, floor_key, c.uniform * static_cast<double>(kept));
    if (c.normalize_log_prob) log_prob_mass = kept;
  }
  WriteSampled(load, token, z_max, log_prob_mass, scale, out_id, out_log_prob);
}

}  // namespace inflight::kernels::cuda::sampling_detail
