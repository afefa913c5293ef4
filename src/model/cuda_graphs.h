// CUDA graphs of the runner's decode steps. Decode steps whose sequences all decode one token and
// are all device-sampled replay a CUDA graph captured for their batch-size bucket (the next power
// of two, at most max_batch_size) and key bucket (GraphKeys). Padding slots decode token 0 at
// position 0 into a scratch KV block no sequence owns. The sampling lists of the step must fit the
// graphs' list buffer (else the step runs without a graph).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "inflight/status.h"
#include "kernels/cuda/paged_batch.h"
#include "model/cuda_buffer.h"
#include "model/cuda_sampling_stage.h"
#include "model/cuda_transformer.h"
#include "model/engine_config.h"
#include "model/lookahead_tokens.h"
#include "model/model_runner.h"

namespace inflight::model {

class CudaDecodeGraphs {
 public:
  // Everything passed by reference is the runner's and outlives the graphs. `scratch_block`: the
  // KV block of padding slots. `enabled` false: Eligible never holds (INFLIGHT_CUDA_GRAPHS=0).
  CudaDecodeGraphs(const EngineConfig& config, CudaTransformer& transformer,
                   CudaSamplingStage& sampling, cudaStream_t stream, std::int64_t scratch_block,
                   bool enabled, std::function<Status()> wait_for_stream);
  ~CudaDecodeGraphs();
  CudaDecodeGraphs(const CudaDecodeGraphs&) = delete;
  CudaDecodeGraphs& operator=(const CudaDecodeGraphs&) = delete;

  // Whether the step can run as a graph (see the top of this file).
  bool Eligible(const StepInput& input) const;
  // Uploads the step and replays its bucket's graph, or, on the bucket's first use, runs the step
  // as is and captures it. Returns the batch bucket: sampled_ids() then holds the bucket's ids,
  // then its log-probs, once the stream gets there. `tokens_from` (lookahead): the sequences whose
  // token is read on the device from the step before; patched in between the upload and the
  // replay (or first run), outside the graph, which reads the tokens from ints_ as any step's.
  Result<std::int32_t> Enqueue(const StepInput& input, const SampledWords* tokens_from = nullptr);
  const DeviceBuffer& sampled_ids() const { return ids_; }
  std::int64_t bytes() const { return ints_.bytes() + ws_.bytes() + ids_.bytes() + lists_.bytes(); }

 private:
  // Capacity of lists_: every slot's penalty pairs for a max_seq_len history, plus bans, up to
  // 16 MiB (long contexts with many penalised sequences then run without a graph).
  std::int64_t ListWords() const {
    return std::min<std::int64_t>(std::int64_t{config_.build.max_batch_size} *
                                      (2 * std::int64_t{config_.build.max_seq_len} + 64),
                                  std::int64_t{1} << 22);
  }
  Status SetUp();
  // The decode batch a graph is captured for: `seqs` slots, attention split for `keys` keys.
  kernels::cuda::PagedBatch GraphBatch(std::int32_t seqs, std::int32_t keys) const;
  // The power of two (at least kMinGraphKeys, at most max_seq_len) at or above `max_kv_len`: the
  // graphs' attention is split for it, so that a short context in an engine built for long ones
  // is not cut into mostly empty splits, nor a long one into too few.
  std::int32_t GraphKeys(std::int32_t max_kv_len) const;
  static constexpr std::int32_t kMinGraphKeys = 256;

  const EngineConfig& config_;
  CudaTransformer& transformer_;
  CudaSamplingStage& sampling_;
  const cudaStream_t stream_;
  const std::int64_t scratch_block_;
  bool enabled_ = true;
  std::function<Status()> wait_for_stream_;  // until the stream's work is done (the group's wait)
  bool ready_ = false;
  std::int32_t slots_ = 0;   // max_batch_size
  std::int32_t blocks_ = 0;  // block-table columns: enough for max_seq_len
  // Every bucket reads the same fixed buffers, filled per step: ints_ holds query_start and
  // logit_rows (constant), then per slot num_cached, token and position, then lookahead's token
  // patches (pairs: slot, word of the step before; read by the patch kernel, never by a graph),
  // the slots' SamplingParams (8-byte aligned) and the block tables [slots, blocks_]; lists_ the
  // sampling lists; ids_ the sampled ids of a bucket's slots, then their log-probs.
  DeviceBuffer ints_, ws_, ids_, lists_;  // never reallocated once captured
  std::int64_t params_at_ = 0;            // word offsets into ints_
  std::int64_t tables_at_ = 0;
  // By (batch bucket, key bucket): GraphKeys' bucket of the step's longest sequence.
  std::map<std::pair<std::int32_t, std::int32_t>, cudaGraphExec_t> graphs_;
};

}  // namespace inflight::model
