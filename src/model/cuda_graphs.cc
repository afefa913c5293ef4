#include "model/cuda_graphs.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/token_patch.h"
#include "model/cuda_status.h"

namespace inflight::model {

namespace kc = kernels::cuda;

CudaDecodeGraphs::CudaDecodeGraphs(const EngineConfig& config, CudaTransformer& transformer,
                                   CudaSamplingStage& sampling, cudaStream_t stream,
                                   std::int64_t scratch_block, bool enabled,
                                   std::function<Status()> wait_for_stream)
    : config_(config),
      transformer_(transformer),
      sampling_(sampling),
      stream_(stream),
      scratch_block_(scratch_block),
      enabled_(enabled),
      wait_for_stream_(std::move(wait_for_stream)) {}

CudaDecodeGraphs::~CudaDecodeGraphs() {
  for (auto& [bucket, exec] : graphs_) cudaGraphExecDestroy(exec);
}

bool CudaDecodeGraphs::Eligible(const StepInput& input) const {
  if (!enabled_ || input.sequences.empty() ||
      input.sequences.size() > static_cast<std::size_t>(config_.build.max_batch_size)) {
    return false;
  }
  const auto max_len = static_cast<std::int32_t>(config_.build.max_seq_len);
  std::size_t list_words = 0;
  for (const SequenceStep& s : input.sequences) {
    if (s.tokens.size() != 1 || !s.device_sampling || s.logits != SequenceStep::Logits::kNone ||
        s.num_cached + 1 > max_len ||
        s.block_table.size() >
            static_cast<std::size_t>((max_len + config_.build.tokens_per_block - 1) /
                                     config_.build.tokens_per_block)) {
      return false;
    }
    list_words += DeviceSamplingBatch::ListWords(*s.device_sampling);
  }
  return list_words <= static_cast<std::size_t>(ListWords());
}

Status CudaDecodeGraphs::SetUp() {
  const EngineConfig& c = config_;
  slots_ = static_cast<std::int32_t>(c.build.max_batch_size);
  blocks_ = static_cast<std::int32_t>((c.build.max_seq_len + c.build.tokens_per_block - 1) /
                                      c.build.tokens_per_block);
  const std::int64_t S = slots_;
  constexpr std::int64_t kParamWords = sizeof(kc::SamplingParams) / 4;
  // After the per-slot ints and the patches, 8-byte aligned.
  params_at_ = (7 * S + 1 + 1) / 2 * 2;
  tables_at_ = params_at_ + S * kParamWords;
  RETURN_IF_ERROR(ints_.Allocate((tables_at_ + S * blocks_) * 4));
  RETURN_IF_ERROR(ids_.Allocate(S * 8));
  RETURN_IF_ERROR(lists_.Allocate(ListWords() * 4));
  std::vector<std::int32_t> constant(static_cast<std::size_t>(2 * S + 1));
  for (std::int64_t i = 0; i <= S; ++i)
    constant[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  for (std::int64_t i = 0; i < S; ++i)
    constant[static_cast<std::size_t>(S + 1 + i)] = static_cast<std::int32_t>(i);
  CUDA_RETURN(
      cudaMemcpy(ints_.get(), constant.data(), constant.size() * 4, cudaMemcpyHostToDevice));
  // One attention workspace, as large as the largest (batch, key) bucket needs, so that no graph's
  // pointers ever move. Splits past a sequence's length exit at once.
  std::int64_t ws = 0;
  for (std::int32_t b = 1;; b = std::min(2 * b, slots_)) {
    for (std::int32_t keys = GraphKeys(1);; keys = GraphKeys(2 * keys)) {
      ws = std::max(ws, transformer_.DecodeWorkspaceBytes(GraphBatch(b, keys)));
      if (keys == GraphKeys(keys + 1)) break;  // max_seq_len
    }
    if (b == slots_) break;
  }
  RETURN_IF_ERROR(ws_.Allocate(ws));
  ready_ = true;
  LOG_INFO(
      "cuda model runner: decode CUDA graphs for batch buckets up to {}, attention workspace {}",
      slots_, MiB(ws));
  return Status::Ok();
}

kc::PagedBatch CudaDecodeGraphs::GraphBatch(std::int32_t seqs, std::int32_t keys) const {
  kc::PagedBatch batch;
  batch.num_seqs = seqs;
  batch.num_tokens = seqs;
  batch.max_query_len = 1;
  batch.max_kv_len = keys;
  batch.max_blocks_per_seq = blocks_;
  return batch;
}

std::int32_t CudaDecodeGraphs::GraphKeys(std::int32_t max_kv_len) const {
  const auto max_seq = static_cast<std::int32_t>(config_.build.max_seq_len);
  std::int32_t keys = kMinGraphKeys;
  while (keys < max_kv_len && keys < max_seq) keys *= 2;
  return std::min(keys, max_seq);
}

Result<std::int32_t> CudaDecodeGraphs::Enqueue(const StepInput& input,
                                               const SampledWords* tokens_from) {
  if (!ready_) RETURN_IF_ERROR(SetUp());
  const auto n = static_cast<std::int32_t>(input.sequences.size());
  std::int32_t bucket = 1;
  while (bucket < n) bucket *= 2;
  bucket = std::min(bucket, slots_);
  const std::int64_t S = slots_;
  // One upload of ints_ from the per-slot ints to the bucket's last table row: per slot
  // num_cached, token, position; the patches; the SamplingParams; the block tables. Padding slots
  // decode greedily from position 0 of the scratch block. The lists go to lists_.
  const std::int64_t slots_at = 2 * S + 1, patches_at = slots_at + 3 * S;
  std::vector<std::int32_t> step(
      static_cast<std::size_t>(tables_at_ + std::int64_t{bucket} * blocks_ - slots_at), 0);
  const auto word = [&](std::int64_t at) -> std::int32_t& {
    return step[static_cast<std::size_t>(at - slots_at)];
  };
  std::fill(step.begin() + (tables_at_ - slots_at), step.end(),
            static_cast<std::int32_t>(scratch_block_));
  sampling_.Clear();
  std::int32_t num_patches = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const SequenceStep& s = input.sequences[static_cast<std::size_t>(i)];
    const std::int32_t from =
        tokens_from != nullptr ? tokens_from->word_of_sequence[static_cast<std::size_t>(i)] : -1;
    word(slots_at + i) = s.num_cached;
    // A patched token uploads 0, a valid id, until the patch overwrites it.
    word(slots_at + S + i) = from >= 0 ? 0 : s.tokens[0];
    if (from >= 0) {
      word(patches_at + std::int64_t{2} * num_patches) = i;
      word(patches_at + std::int64_t{2} * num_patches + 1) = from;
      ++num_patches;
    }
    word(slots_at + 2 * S + i) = s.num_cached;
    RETURN_IF_ERROR(sampling_.Add(*s.device_sampling, stream_));
    std::copy(s.block_table.begin(), s.block_table.end(),
              step.begin() + (tables_at_ + std::int64_t{i} * blocks_ - slots_at));
  }
  for (std::int32_t i = n; i < bucket; ++i) sampling_.AddPadding();
  const DeviceSamplingBatch& sampling_batch = sampling_.batch();
  std::memcpy(&word(params_at_), sampling_batch.params().data(),
              sampling_batch.params().size() * sizeof(kc::SamplingParams));
  auto* d_ints = ints_.get<std::int32_t>();
  auto* d_slots = d_ints + slots_at;
  CUDA_RETURN(
      cudaMemcpyAsync(d_slots, step.data(), step.size() * 4, cudaMemcpyHostToDevice, stream_));
  const std::vector<std::int32_t>& lists = sampling_batch.lists();
  if (!lists.empty()) {
    CUDA_RETURN(cudaMemcpyAsync(lists_.get(), lists.data(), lists.size() * 4,
                                cudaMemcpyHostToDevice, stream_));
  }
  if (num_patches > 0) {
    CUDA_RETURN(kc::PatchTokenIds(d_slots + S, d_ints + patches_at, num_patches, tokens_from->words,
                                  static_cast<std::int32_t>(config_.vocab_size), stream_));
  }

  std::int32_t max_kv = 1;
  for (const SequenceStep& s : input.sequences) max_kv = std::max(max_kv, s.num_cached + 1);
  const std::int32_t keys = GraphKeys(max_kv);
  auto it = graphs_.find({bucket, keys});
  if (it != graphs_.end()) {
    CUDA_RETURN(cudaGraphLaunch(it->second, stream_));
  } else {
    CudaTransformer::Launch l;
    l.batch = GraphBatch(bucket, keys);
    l.batch.query_start = d_ints;
    l.batch.num_cached = d_slots;
    l.batch.block_tables = d_ints + tables_at_;
    l.token_ids = d_slots + S;
    l.positions = d_slots + 2 * S;
    l.logit_rows = d_ints + S + 1;
    l.num_rows = bucket;
    l.logit_rows_are_token_rows = true;  // the constant 0, 1, ... of ints_
    l.sampling_params = reinterpret_cast<const kc::SamplingParams*>(d_ints + params_at_);
    l.sampling_lists = lists_.get<std::int32_t>();
    // The bucket's ids, then its log-probs.
    l.sampled_ids = ids_.get<std::int32_t>();
    l.sampled_log_probs = ids_.get<float>() + bucket;
    l.num_decode_seqs = bucket;
    l.decode_max_kv_len = l.batch.max_kv_len;
    l.decode_ws = ws_.get();
    l.decode_ws_bytes = static_cast<std::size_t>(ws_.bytes());
    // First use of the bucket: run it as is (which also warms up cuBLASLt's plans and loads the
    // kernels), then record the same launches into the bucket's graph.
    RETURN_IF_ERROR(transformer_.Enqueue(l));
    // The group's wait, not cudaStreamSynchronize: with tp or pp > 1 the step holds collectives,
    // whose peers may need this process's MPI progress to receive the step at all.
    RETURN_IF_ERROR(wait_for_stream_());
    cudaGraph_t graph = nullptr;
    CUDA_RETURN(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    const Status recorded = transformer_.Enqueue(l);
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    cudaGraphExec_t exec = nullptr;
    Status made = recorded;
    if (made.ok()) made = CudaStatus(ended, "cudaStreamEndCapture");
    if (made.ok()) made = CudaStatus(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (made.ok()) {
      graphs_[{bucket, keys}] = exec;
      LOG_INFO("cuda model runner: captured the decode graph of batch bucket {}, keys up to {}",
               bucket, keys);
    } else {
      // This step's tokens are already computed; later steps run without graphs.
      LOG_WARN("cuda model runner: decode graph capture failed, graphs off: {}", made.ToString());
      cudaGetLastError();
      enabled_ = false;
    }
  }
  return bucket;
}

}  // namespace inflight::model
