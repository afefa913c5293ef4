#include "gpu_paged_setup.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace inflight::bench::gpu {

kernels::cuda::PagedBatch PagedSetup::Batch(int set) const {
  kernels::cuda::PagedBatch b;
  b.num_seqs = num_seqs;
  b.num_tokens = num_seqs * query_len;
  b.max_query_len = query_len;
  b.max_kv_len = num_cached + query_len;
  b.query_start = query_start.get<std::int32_t>();
  b.num_cached = cached.get<std::int32_t>();
  b.block_tables =
      tables.get<std::int32_t>() + static_cast<std::int64_t>(set) * num_seqs * blocks_per_seq;
  b.max_blocks_per_seq = blocks_per_seq;
  return b;
}

PagedSetup MakePagedSetup(std::int32_t num_seqs, std::int32_t query_len, std::int32_t num_cached,
                          std::int32_t tokens_per_block, std::int32_t num_sets,
                          std::uint64_t seed) {
  PagedSetup p;
  p.num_seqs = num_seqs;
  p.query_len = query_len;
  p.num_cached = num_cached;
  p.tokens_per_block = tokens_per_block;
  p.num_sets = num_sets;
  p.blocks_per_seq = (num_cached + query_len + tokens_per_block - 1) / tokens_per_block;
  p.num_blocks = static_cast<std::int64_t>(num_sets) * num_seqs * p.blocks_per_seq;

  std::vector<std::int32_t> query_start(static_cast<std::size_t>(num_seqs) + 1);
  for (std::int32_t s = 0; s <= num_seqs; ++s)
    query_start[static_cast<std::size_t>(s)] = s * query_len;
  const std::vector<std::int32_t> cached(static_cast<std::size_t>(num_seqs), num_cached);
  // The permutation is the table, set after set: each set gets its own random blocks.
  std::vector<std::int32_t> tables(static_cast<std::size_t>(p.num_blocks));
  std::iota(tables.begin(), tables.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(tables.begin(), tables.end(), rng);

  auto upload = [](const std::vector<std::int32_t>& host) {
    DeviceBuffer d(host.size() * sizeof(std::int32_t));
    BENCH_CUDA(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
    return d;
  };
  p.query_start = upload(query_start);
  p.cached = upload(cached);
  p.tables = upload(tables);
  return p;
}

}  // namespace inflight::bench::gpu
