// How many tokens the CPU runner's KV pool of one rank holds. A rank allocates K and V for its own
// shard only (model_shard.h: a pipeline stage's layers, a tensor-parallel rank's kv heads), so the
// bytes a token costs are the shard's, not the whole engine's: a stage that holds half the layers
// fits twice the tokens in the same bytes. The ranks of a group may then differ (uneven layer
// ranges); the leader schedules over the smallest pool of the group (mpi_load_report.h), so no
// rank is handed a block it does not have.
#pragma once

#include <cstdint>

#include "inflight/executor.h"
#include "inflight/status.h"
#include "model/engine_config.h"
#include "model/model_shard.h"

namespace inflight::executor {

// CPU KV pool when max_tokens_in_paged_kv_cache is unset: enough for every sequence at full length,
// capped at this many bytes per rank.
inline constexpr std::int64_t kDefaultCpuKvCacheBytes = std::int64_t{1} << 30;

struct CpuKvCacheSize {
  std::int64_t tokens = 0;           // the pool's capacity in tokens (whole blocks are cut later)
  std::int64_t bytes_per_token = 0;  // K and V of the shard's layers and kv heads
};

// `kv.max_tokens` when set (every rank alike); else max_batch_size x max_seq_len tokens, at most
// kDefaultCpuKvCacheBytes of the shard's K/V, at least max_seq_len. An error names
// max_tokens_in_paged_kv_cache when it is under one block.
Result<CpuKvCacheSize> SizeCpuKvCache(const model::EngineConfig& engine,
                                      const model::ModelShard& shard, const KvCacheConfig& kv);

}  // namespace inflight::executor
