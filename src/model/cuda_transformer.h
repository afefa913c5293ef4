// The forward pass of one step on the device, over one shard of the engine (model_shard.h):
// embeddings (first stage), the shard's layers, the final norm and lm_head of the wanted rows with
// their copy to the host or device sampling (last stage). Queued on one stream with no host
// synchronisation and no allocation, so that a decode step can be captured into a CUDA graph
// (cuda_graphs.h). model/transformer.h is the same pass on the CPU; the two call the shard's
// collectives (collectives.h) at the same places.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"
#include "kernels/cuda/fp8_activation_producers.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/paged_batch.h"
#include "kernels/cuda/quant_linear.h"
#include "kernels/cuda/sampling.h"
#include "model/activation_amax.h"
#include "model/collectives.h"
#include "model/cuda_buffer.h"
#include "model/cuda_weights.h"
#include "model/engine_config.h"
#include "model/model_shard.h"

namespace inflight::model {

// The paged KV cache of the shard's layers: per layer a K pool, then a V pool, each
// [num_blocks + 1, kv heads, tokens_per_block, head_dim] in the activation dtype, or of E4M3 bytes
// for an FP8 cache (kv_cache_quant_algo fp8, kernels/cuda/paged_batch.h KvFp8Scales, the layer's
// scales in DeviceLayer). The last block is the scratch block of CUDA-graph padding slots.
struct CudaKvCache {
  DeviceBuffer buffer;
  std::int64_t num_blocks = 0;  // blocks the executor sees
  std::int64_t pool_elems = 0;  // one pool (K or V of one layer)
  bool fp8 = false;
  std::int64_t elem_bytes() const { return fp8 ? 1 : 2; }
};

// The decode kernel's view of a step's first `num_seqs` sequences, one query row each; rows keep
// their step-wide indices.
kernels::cuda::PagedBatch LeadingDecodes(const kernels::cuda::PagedBatch& batch,
                                         std::int32_t num_seqs, std::int32_t max_kv_len);
// The context kernel's view of the sequences after the first `skip`.
kernels::cuda::PagedBatch AfterDecodes(const kernels::cuda::PagedBatch& batch, std::int32_t skip);

class CudaTransformer {
 public:
  // Device pointers and sizes of one step: everything Enqueue needs to queue the forward pass.
  struct Launch {
    kernels::cuda::PagedBatch batch;
    const std::int32_t* token_ids = nullptr;
    const std::int32_t* positions = nullptr;
    // Dynamic RoPE past its original length (rope_frequencies.h RopeVariesWithLength): device
    // [num_seqs, head_dim / 2], sequence s's frequencies for this step; null: the weights' one
    // table for every sequence.
    const float* rope_inv_freq = nullptr;
    const std::int32_t* logit_rows = nullptr;  // [num_rows] token rows through lm_head
    std::int64_t num_rows = 0;
    // logit_rows[i] == i for every i: the final norm then reads the token rows where they are.
    bool logit_rows_are_token_rows = false;
    std::int64_t num_out_rows = 0;  // rows [0, num_out_rows) are copied to host_logits
    float* host_logits = nullptr;   // the rest are sampled (parameters per sampled row)
    const kernels::cuda::SamplingParams* sampling_params = nullptr;  // [num_rows - num_out_rows]
    const std::int32_t* sampling_lists = nullptr;                    // what sampling_params index
    std::int32_t* sampled_ids = nullptr;  // device [num_rows - num_out_rows]
    float* sampled_log_probs = nullptr;   // device [num_rows - num_out_rows]
    // Sequences [0, num_decode_seqs) have one query row each and go to the decode kernel, which
    // reads each KV head once for all its query heads; the context kernel, which takes the rest,
    // would give each of them a whole query tile per head. A decode-only step sends them all.
    // Each layer's decode attention picks its split for its window (partition_tokens 0);
    // decode_ws holds DecodeWorkspaceBytes(the decodes).
    std::int32_t num_decode_seqs = 0;
    std::int32_t decode_max_kv_len = 0;  // over those sequences
    void* decode_ws = nullptr;
    std::size_t decode_ws_bytes = 0;
    // Set: the context attention runs there (a few SMs, high priority) beside the decode attention
    // on the main stream (model/attention_split.h); null: both on the main stream, in turn.
    cudaStream_t context_stream = nullptr;
  };

  // Everything passed by reference is the runner's and outlives the transformer; `weights` and
  // `kv` are filled before the first Enqueue. `fused_swiglu`: kernels/cuda/gemm_swiglu.h for
  // prompt-sized steps (INFLIGHT_FUSED_SWIGLU). windows: the keys each layer of the engine attends
  // (num_layers entries, model/attention_windows.h).
  CudaTransformer(const EngineConfig& config, const ModelShard& shard, DType dtype,
                  const CudaWeights& weights, const CudaKvCache& kv,
                  kernels::cuda::CublasLtGemm& gemm, cudaStream_t stream, Collectives& collectives,
                  bool fused_swiglu, std::vector<kernels::cuda::AttentionWindow> windows);
  ~CudaTransformer();
  CudaTransformer(const CudaTransformer&) = delete;
  CudaTransformer& operator=(const CudaTransformer&) = delete;

  // Activations for up to `max_tokens` rows, logits in chunks of logit_chunk() rows; for a
  // quantized engine also the scratch of its quantized linears.
  Status AllocateActivations(std::int64_t max_tokens);
  std::int64_t activation_bytes() const { return activation_bytes_; }
  // The events that fork a context stream (Launch::context_stream) from the main stream and join
  // it back; needed before a Launch sets a context stream.
  Status CreateAttentionSplitEvents();

  // Queues the forward pass on the stream: no host synchronisation, no allocation, so that a
  // decode step can be captured into a CUDA graph.
  Status Enqueue(const Launch& l);

  // Calibration of a float engine: every Enqueue folds the largest |x| of each layer's
  // activations (model/activation_amax.h's points) into amax_bits, device [shard layers,
  // kNumAmaxPoints] float bits (kernels/cuda/amax.h); nullptr stops it.
  void ObserveAmax(unsigned* amax_bits) { amax_bits_ = amax_bits; }

  // Decode attention workspace for `decodes` (Launch::decode_ws): the most any of the shard's
  // layers needs for its window.
  std::int64_t DecodeWorkspaceBytes(const kernels::cuda::PagedBatch& decodes) const;
  // (Row, key) pairs the rows at positions [first, first + n) attend, averaged over the shard's
  // layers (windows make them differ): the attention split's measure of work.
  double MeanRowKeys(std::int64_t first, std::int64_t n) const;

 private:
  Status Norm(void* out, const void* x, const void* w, const void* b, std::int64_t rows);
  Status Linear(void* y, const void* x, const void* w, const void* bias, std::int64_t m,
                std::int64_t n, std::int64_t k);
  // y += x · wᵀ (+ bias): a layer's output added to the residual stream in the GEMM's epilogue.
  Status LinearAdd(void* y, const void* x, const void* w, const void* bias, std::int64_t m,
                   std::int64_t n, std::int64_t k);
  // A decoder linear (qkv, attn_out, mlp_in, down): y (+)= x · Wᵀ (+ bias) with the float weight
  // w, or the quantized one q where present (kernels/cuda/quant_linear.h; x's rows are then
  // rounded to E4M3 in place for fp8, as on the CPU).
  Status DecoderLinear(void* y, void* x, const kernels::cuda::QuantWeight& q, const void* w,
                       const void* bias, std::int64_t m, std::int64_t n, std::int64_t k,
                       bool accumulate, const char* what);
  // residual_ += Σ_ranks x · wᵀ (+ bias) for a row-parallel layer (attention's output projection,
  // the MLP's down projection), whose product on each tensor-parallel rank is a partial sum over
  // its heads or MLP columns. Rank 0 adds its product (and the bias, which only rank 0 holds:
  // docs/engine_format.md) to the residual stream, the other ranks write theirs over their copy of
  // it, and the all-reduce leaves residual + every partial on every rank. One rank: the LinearAdd.
  Status RowParallelAdd(void* x, const kernels::cuda::QuantWeight& q, const void* w,
                        const void* bias, std::int64_t m, std::int64_t k, const char* what);
  Status AllocateQuantScratch(std::int64_t max_tokens);
  // W8A8 FP8 layers (cuda_transformer_fp8.cc): the attention block's norm and qkv, and the MLP
  // block's norm, gate/up and down (with its all-reduce), through FP8 codes made by the kernels
  // producing the activations. false, having queued nothing: the layer takes the unfused path.
  Result<bool> Fp8NormQkv(const DeviceLayer& l, std::int64_t T, std::int64_t qkv_dim);
  Result<bool> Fp8NormMlp(const DeviceLayer& l, std::int64_t T, std::int64_t inter);
  // A [max_tokens_, width] activation buffer holding FP8 codes and row scales instead, and
  // whether they fit in it.
  kernels::cuda::Fp8Rows Fp8RowsIn(void* buffer, std::int64_t width) const;
  bool Fp8RowsFit(std::int64_t width) const;
  // logits_ [rows, vocab] fp32 = logit_x_ · lm_headᵀ: this rank's vocabulary columns, then the
  // other ranks' (Collectives::AllGatherColumns).
  Status LmHead(std::int64_t rows);

  const EngineConfig& config_;
  const ModelShard shard_;
  const DType dtype_;
  const CudaWeights& weights_;
  const CudaKvCache& kv_;
  kernels::cuda::CublasLtGemm& gemm_;
  const cudaStream_t stream_;
  Collectives& collectives_;
  const bool fused_swiglu_;
  const float rope_scale_;  // on cos and sin: yarn's attention factor, else 1
  const std::vector<kernels::cuda::AttentionWindow> windows_;  // by engine layer
  unsigned* amax_bits_ = nullptr;
  // Layer i's point p of x [rows, cols] (row stride `stride`) into amax_bits_, when observing.
  Status Observe(std::size_t i, AmaxPoint p, const void* x, std::int64_t rows, std::int64_t cols,
                 std::int64_t stride);
  // The distinct windows of the shard's layers, and how many layers have each.
  std::vector<kernels::cuda::AttentionWindow> distinct_windows_;
  std::vector<std::int64_t> distinct_window_layers_;
  cudaEvent_t attn_fork_ = nullptr, attn_join_ = nullptr;

  // Activations for up to max_num_tokens rows; logits in chunks of logit_chunk_ rows: at most
  // kLogitChunk, fewer when max_batch_size is smaller. One lm_head GEMM reads the 1 GB of an 8B
  // model's lm_head once, so a decode step of 1024 sequences in chunks of 128 read it 8 times
  // (~1.3 ms more on an H100); 512 rows of fp32 logits cost 263 MB of a 128k vocabulary.
  static constexpr std::int64_t kLogitChunk = 512;
  std::int64_t logit_chunk_ = 0;
  std::int64_t max_tokens_ = 0;  // rows of the activation buffers
  DeviceBuffer residual_, normed_, qkv_, attn_, mlp_, mlp_act_, logit_x_, logits_;
  std::int64_t activation_bytes_ = 0;
  // A quantized engine's linears: the FP8 GEMM (fp8 on a device with one), the dispatcher, and one
  // scratch the layers share (they run one after another on the stream).
  std::unique_ptr<kernels::cuda::CublasLtFp8Gemm> fp8_gemm_;
  std::unique_ptr<kernels::cuda::QuantLinear> quant_linear_;
  DeviceBuffer quant_scratch_buffer_;
  kernels::cuda::QuantScratch quant_scratch_;
  // The fewest rows for the fused gate/up + SwiGLU kernel: against cuBLASLt and the SwiGLU kernel
  // it measured 0.92-1.05x from 1024 rows but 1.01-1.09x at 256 (H100 and H200, 8B shapes).
  static constexpr std::int64_t kFusedSwiGluMinRows = 1024;
  // The same for the FP8 one (gemm_swiglu_fp8.h). Alone against cuBLASLt and the SwiGLU codes pass
  // it measured 1.12x at 1024 rows, 0.98x at 2048 and 0.89x at 8192 (H200, 8B shapes), yet from
  // 1024 rows a decode step of 1024 sequences took 21.8 ms, not 22.4: the card runs at its power
  // cap, where the bytes and instructions it saves count (bench/NOTES.md entry 22).
  static constexpr std::int64_t kFusedSwiGluFp8MinRows = 1024;
};

}  // namespace inflight::model
