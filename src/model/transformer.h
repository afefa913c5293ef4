// The decoder-only transformer forward pass on CPU over the paged KV cache: one sequence of ops for
// the Llama family (RMSNorm, RoPE, GQA, SwiGLU; Qwen3's per-head q/k RMSNorm; sliding windows) and
// GPT-2 (learned positions, LayerNorm, gelu_new), chosen by EngineConfig flags, over one shard of
// the engine (model_shard.h): its layers, its heads and MLP columns, with the shard's collectives
// (collectives.h) where a split engine joins up. model/cuda_transformer.h is the same pass on the
// device.
#pragma once

#include <cstdint>
#include <vector>

#include "inflight/status.h"
#include "kernels/cpu/paged_kv.h"
#include "kernels/cpu/thread_pool.h"
#include "model/activation_amax.h"
#include "model/collectives.h"
#include "model/engine_config.h"
#include "model/model_shard.h"
#include "model/transformer_weights.h"

namespace inflight::model {

// One layer's K and V pools, each [num_blocks, num_kv_heads, tokens_per_block, head_dim] (the
// shard's kv heads): fp32, or E4M3 bytes for an FP8 KV cache (EngineConfig::quant.kv_cache_fp8).
struct LayerKvPools {
  float* k = nullptr;
  float* v = nullptr;
  std::uint8_t* k8 = nullptr;
  std::uint8_t* v8 = nullptr;
};

struct ForwardBatch {
  kernels::cpu::PagedBatch paged;            // sequences, their new rows and block tables
  const std::int32_t* token_ids = nullptr;   // [num_tokens]
  const std::int32_t* positions = nullptr;   // [num_tokens], consistent with paged
  const std::int32_t* logit_rows = nullptr;  // [num_logit_rows]: rows whose logits are wanted
  std::int32_t num_logit_rows = 0;
};

class Transformer {
 public:
  // `weights` (the shard's) point into storage that must outlive the Transformer, and so must
  // `collectives`; `pool` may be nullptr. windows: the keys each layer of the engine attends
  // (num_layers entries, model/attention_windows.h).
  Transformer(const EngineConfig& config, const ModelShard& shard, TransformerWeights weights,
              std::vector<kernels::cpu::AttentionWindow> windows, std::int64_t tokens_per_block,
              kernels::cpu::ThreadPool* pool, Collectives& collectives);

  // Computes the batch's rows through the shard's layers, writes their K/V into `kv` (one entry
  // per layer of the shard) and, on the last stage, fills logits [num_logit_rows, vocab].
  // Preconditions (the runner validates them): token ids in [0, vocab), positions <
  // max_position_embeddings for learned positions, block tables covering every position with
  // block ids inside the pools. Errors: the collectives'.
  Status Forward(const ForwardBatch& batch, const std::vector<LayerKvPools>& kv, float* logits);

  // Bytes of the activation buffers currently held.
  std::int64_t workspace_bytes() const;

  // Calibration: each Forward folds its activations into *amax (num_layers entries), which must
  // outlive the Transformer; nullptr stops it.
  void ObserveAmax(ActivationAmax* amax) { amax_ = amax; }

 private:
  void Norm(float* out, const float* x, float* residual, WeightPtr weight, WeightPtr bias,
            std::int64_t num_tokens) const;
  // hidden_ = x · wᵀ (+ bias) of a row-parallel layer (attention's output projection, the MLP's
  // down projection), summed over the tensor-parallel ranks: each rank's product is a partial sum
  // over its heads or MLP columns (the bias is rank 0's, zeros elsewhere: docs/engine_format.md).
  Status RowParallelLinear(const float* x, std::int64_t k, WeightPtr w, WeightPtr bias,
                           std::int64_t num_tokens);
  // logits [rows, vocab] = x · lm_headᵀ: this rank's vocabulary columns, gathered from the others.
  Status LmHead(float* logits, const float* x, std::int64_t rows);

  EngineConfig config_;
  ModelShard shard_;
  TransformerWeights weights_;
  std::vector<kernels::cpu::AttentionWindow> windows_;  // by engine layer
  kernels::cpu::PagedKvShape kv_shape_;
  kernels::cpu::ThreadPool* pool_;
  Collectives& collectives_;
  // Rotary embedding: one table for every sequence, or (dynamic RoPE past its original length) a
  // table per sequence of the step, rebuilt each Forward.
  std::vector<float> inv_freq_;  // [head_dim / 2], rope only
  float rope_scale_ = 1.0f;      // on cos and sin: yarn's attention_factor
  bool rope_per_sequence_ = false;
  std::vector<float> seq_inv_freq_;  // [num_seqs, head_dim / 2] when rope_per_sequence_

  // q and k rows of the step rotated (rope engines only).
  void Rotate(const ForwardBatch& batch, float* q, float* k) const;

  ActivationAmax* amax_ = nullptr;
  void Observe(std::size_t shard_layer, AmaxPoint p, const float* x, std::int64_t rows,
               std::int64_t cols, std::int64_t stride) const {
    if (amax_ != nullptr) {
      amax_->Observe(shard_.first_layer + static_cast<std::int64_t>(shard_layer), p, x, rows, cols,
                     stride);
    }
  }

  // Activations, grown to the largest step seen.
  std::vector<float> residual_, normed_, hidden_, qkv_, attn_, mlp_, mlp_act_, logit_in_,
      vocab_slice_;
};

}  // namespace inflight::model
