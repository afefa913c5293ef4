// Paged KV batches for the GPU kernel benchmarks: num_seqs sequences of the same shape, their
// blocks a random permutation of the pool (non-monotonic tables), with several disjoint table sets
// over one pool so that successive calls read different blocks and L2 does not serve them.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu_bench_util.h"
#include "kernels/cuda/paged_batch.h"

namespace inflight::bench::gpu {

struct PagedSetup {
  std::int32_t num_seqs = 0;
  std::int32_t query_len = 0;   // new rows per sequence this step
  std::int32_t num_cached = 0;  // positions already in the pools per sequence
  std::int32_t tokens_per_block = 0;
  std::int32_t blocks_per_seq = 0;  // ceil((num_cached + query_len) / tokens_per_block)
  std::int32_t num_sets = 0;
  std::int64_t num_blocks = 0;               // in the pool: num_sets * num_seqs * blocks_per_seq
  DeviceBuffer query_start, cached, tables;  // tables: [num_sets, num_seqs, blocks_per_seq]

  // The batch of set `set` (pointers into this object's device arrays).
  kernels::cuda::PagedBatch Batch(int set) const;
};

// Builds the arrays on the host with a seeded generator and uploads them.
PagedSetup MakePagedSetup(std::int32_t num_seqs, std::int32_t query_len, std::int32_t num_cached,
                          std::int32_t tokens_per_block, std::int32_t num_sets, std::uint64_t seed);

}  // namespace inflight::bench::gpu
