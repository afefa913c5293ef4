#include "model/transformer.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/fp8_activation.h"
#include "kernels/cpu/kv_cache_write.h"
#include "kernels/cpu/kv_cache_write_fp8.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/paged_attention_fp8.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "model/rope_frequencies.h"

namespace inflight::model {

namespace k = kernels::cpu;

namespace {
void Grow(std::vector<float>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
}
}  // namespace

Transformer::Transformer(const EngineConfig& config, const ModelShard& shard,
                         TransformerWeights weights, std::vector<k::AttentionWindow> windows,
                         std::int64_t tokens_per_block, k::ThreadPool* pool,
                         Collectives& collectives)
    : config_(config),
      shard_(shard),
      weights_(std::move(weights)),
      windows_(std::move(windows)),
      kv_shape_{shard.num_kv_heads, tokens_per_block, config.head_dim},
      pool_(pool),
      collectives_(collectives) {
  inv_freq_ = RopeInvFrequencies(config_);
  rope_scale_ = RopeScale(config_);
  rope_per_sequence_ = RopeVariesWithLength(config_);
}

void Transformer::Rotate(const ForwardBatch& batch, float* q, float* k) const {
  const std::int64_t hd = config_.head_dim, qkv_dim = shard_.qkv_rows(hd);
  const std::int64_t nq = shard_.num_q_heads, nkv = shard_.num_kv_heads;
  if (!rope_per_sequence_) {
    const std::int64_t T = batch.paged.num_tokens();
    k::ApplyRope(q, T, nq, hd, qkv_dim, batch.positions, inv_freq_.data(), rope_scale_);
    k::ApplyRope(k, T, nkv, hd, qkv_dim, batch.positions, inv_freq_.data(), rope_scale_);
    return;
  }
  for (std::int32_t s = 0; s < batch.paged.num_seqs; ++s) {
    const std::int64_t r0 = batch.paged.query_start[s], n = batch.paged.query_start[s + 1] - r0;
    const float* inv = seq_inv_freq_.data() + s * (hd / 2);
    k::ApplyRope(q + r0 * qkv_dim, n, nq, hd, qkv_dim, batch.positions + r0, inv, rope_scale_);
    k::ApplyRope(k + r0 * qkv_dim, n, nkv, hd, qkv_dim, batch.positions + r0, inv, rope_scale_);
  }
}

void Transformer::Norm(float* out, const float* x, float* residual, WeightPtr weight,
                       WeightPtr bias, std::int64_t num_tokens) const {
  if (config_.norm == NormKind::kRmsNorm) {
    k::RmsNorm(out, x, residual, weight, num_tokens, config_.hidden_size, config_.norm_eps);
  } else {
    k::LayerNorm(out, x, residual, weight, bias, num_tokens, config_.hidden_size, config_.norm_eps);
  }
}

// Data flow of one step (T rows, hidden H). The residual stream is updated by the fused norms:
//
//   residual = embed(tokens) [+ pos_embed(positions)]          (later stages: the previous stage's
//                                                               hidden and residual)
//   per layer:  normed = attn_norm(hidden + residual)       (layer 0: attn_norm(residual))
//               qkv = normed · Wqkvᵀ + b;  [qk_norm: rmsnorm each head of q, k];  rope(q, k)
//               write k, v to the pools
//               hidden = Σ_ranks attention(q, cached k/v in the layer's window) · Woutᵀ + b
//               normed = mlp_norm(hidden + residual)
//               hidden = Σ_ranks down(act(normed · W1ᵀ + b)) + b    act: swiglu on gate_up, or
//               gelu_new on fc
//   logits rows: final_norm(hidden + residual) · lm_headᵀ     (the last stage; other stages hand
//                                                               hidden and residual on)
// The heads, the MLP columns and the KV pools are the shard's (a tensor-parallel rank's part);
// the sums over ranks are RowParallelLinear's all-reduce, nothing with one rank.
Status Transformer::Forward(const ForwardBatch& batch, const std::vector<LayerKvPools>& kv,
                            float* logits) {
  const std::int64_t T = batch.paged.num_tokens();
  const std::int64_t H = config_.hidden_size, hd = config_.head_dim;
  const std::int64_t nq = shard_.num_q_heads, nkv = shard_.num_kv_heads;
  const std::int64_t q_dim = shard_.q_dim(hd), qkv_dim = shard_.qkv_rows(hd);
  const std::int64_t inter = shard_.intermediate_size;
  const bool swiglu = config_.activation == Activation::kSwiGlu;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  if (T == 0) return Status::Ok();

  Grow(residual_, T * H);
  Grow(normed_, T * H);
  Grow(hidden_, T * H);
  Grow(qkv_, T * qkv_dim);
  Grow(attn_, T * q_dim);
  Grow(mlp_, T * (swiglu ? 2 * inter : inter));
  Grow(mlp_act_, T * inter);

  if (shard_.first_stage()) {
    k::EmbeddingGather(residual_.data(), batch.token_ids, T, weights_.embed, H, weights_.pos_embed,
                       batch.positions);
  } else {
    RETURN_IF_ERROR(
        collectives_.ReceiveFromPreviousStage(hidden_.data(), T * H, DType::kFloat32, nullptr));
    RETURN_IF_ERROR(
        collectives_.ReceiveFromPreviousStage(residual_.data(), T * H, DType::kFloat32, nullptr));
  }
  if (rope_per_sequence_) {
    // Dynamic RoPE: each sequence's theta follows the length it reaches in this step (the last new
    // position + 1), as transformers recomputes inv_freq per forward call; keys already in the
    // cache keep the rotation they were written with.
    Grow(seq_inv_freq_, batch.paged.num_seqs * (hd / 2));
    for (std::int32_t s = 0; s < batch.paged.num_seqs; ++s) {
      const std::int64_t length =
          batch.paged.num_cached[s] + batch.paged.query_start[s + 1] - batch.paged.query_start[s];
      RopeInvFrequenciesForLength(config_, length, seq_inv_freq_.data() + s * (hd / 2));
    }
  }

  for (std::size_t i = 0; i < weights_.layers.size(); ++i) {
    const LayerWeights& l = weights_.layers[i];
    if (shard_.first_layer + static_cast<std::int64_t>(i) == 0) {
      Norm(normed_.data(), residual_.data(), nullptr, l.attn_norm, l.attn_norm_bias, T);
    } else {
      Norm(normed_.data(), hidden_.data(), residual_.data(), l.attn_norm, l.attn_norm_bias, T);
    }
    // W8A8: each quantized linear's input goes through E4M3 first, as on the GPU (the buffers are
    // read by that linear only).
    const bool fp8_acts = config_.quant.quant_algo == QuantAlgo::kFp8;
    Observe(i, AmaxPoint::kQkvInput, normed_.data(), T, H, H);
    if (fp8_acts) k::QuantizeActivationsFp8(normed_.data(), T, H, H, l.qkv_input_scale);
    k::Linear(qkv_.data(), normed_.data(), H, l.qkv, l.qkv_bias, T, H, qkv_dim, pool_);
    float* q = qkv_.data();
    float* kk = q + q_dim;
    float* v = kk + nkv * hd;
    if (config_.qk_norm) {
      k::HeadRmsNorm(q, T, nq, hd, qkv_dim, l.q_norm, config_.norm_eps);
      k::HeadRmsNorm(kk, T, nkv, hd, qkv_dim, l.k_norm, config_.norm_eps);
    }
    if (config_.position_embedding == PositionEmbedding::kRope) Rotate(batch, q, kk);
    const auto layer = static_cast<std::size_t>(shard_.first_layer) + i;
    Observe(i, AmaxPoint::kKey, kk, T, nkv * hd, qkv_dim);
    Observe(i, AmaxPoint::kValue, v, T, nkv * hd, qkv_dim);
    if (config_.quant.kv_cache_fp8) {
      k::KvCacheWriteFp8(kv[i].k8, kv[i].v8, kk, v, qkv_dim, batch.paged, kv_shape_,
                         l.k_cache_scale, l.v_cache_scale);
      k::PagedAttentionFp8(attn_.data(), q, qkv_dim, kv[i].k8, kv[i].v8, l.k_cache_scale,
                           l.v_cache_scale, batch.paged, kv_shape_, nq, scale, windows_[layer],
                           pool_);
    } else {
      k::KvCacheWrite(kv[i].k, kv[i].v, kk, v, qkv_dim, batch.paged, kv_shape_);
      k::PagedAttention(attn_.data(), q, qkv_dim, kv[i].k, kv[i].v, batch.paged, kv_shape_, nq,
                        scale, windows_[layer], pool_);
    }
    Observe(i, AmaxPoint::kAttnOutInput, attn_.data(), T, q_dim, q_dim);
    if (fp8_acts) k::QuantizeActivationsFp8(attn_.data(), T, q_dim, q_dim, l.attn_out_input_scale);
    RETURN_IF_ERROR(RowParallelLinear(attn_.data(), q_dim, l.attn_out, l.attn_out_bias, T));

    Norm(normed_.data(), hidden_.data(), residual_.data(), l.mlp_norm, l.mlp_norm_bias, T);
    Observe(i, AmaxPoint::kMlpInput, normed_.data(), T, H, H);
    if (fp8_acts) k::QuantizeActivationsFp8(normed_.data(), T, H, H, l.mlp_in_input_scale);
    if (swiglu) {
      k::Linear(mlp_.data(), normed_.data(), H, l.gate_up, l.gate_up_bias, T, H, 2 * inter, pool_);
      k::SwiGlu(mlp_act_.data(), mlp_.data(), T, inter);
    } else {
      k::Linear(mlp_.data(), normed_.data(), H, l.fc, l.fc_bias, T, H, inter, pool_);
      k::GeluNew(mlp_act_.data(), mlp_.data(), T * inter);
    }
    Observe(i, AmaxPoint::kDownInput, mlp_act_.data(), T, inter, inter);
    if (fp8_acts) k::QuantizeActivationsFp8(mlp_act_.data(), T, inter, inter, l.down_input_scale);
    RETURN_IF_ERROR(RowParallelLinear(mlp_act_.data(), inter, l.down, l.down_bias, T));
  }
  if (!shard_.last_stage()) {
    RETURN_IF_ERROR(collectives_.SendToNextStage(hidden_.data(), T * H, DType::kFloat32, nullptr));
    return collectives_.SendToNextStage(residual_.data(), T * H, DType::kFloat32, nullptr);
  }

  // Only the rows whose logits are wanted go through the final norm and lm_head.
  const std::int64_t R = batch.num_logit_rows;
  if (R == 0) return Status::Ok();
  Grow(logit_in_, 2 * R * H);
  float* x = logit_in_.data();
  float* res = x + R * H;
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int64_t row = batch.logit_rows[r];
    std::memcpy(x + r * H, hidden_.data() + row * H, static_cast<std::size_t>(H) * sizeof(float));
    std::memcpy(res + r * H, residual_.data() + row * H,
                static_cast<std::size_t>(H) * sizeof(float));
  }
  Norm(x, x, res, weights_.final_norm, weights_.final_norm_bias, R);
  return LmHead(logits, x, R);
}

Status Transformer::RowParallelLinear(const float* x, std::int64_t k, WeightPtr w, WeightPtr bias,
                                      std::int64_t num_tokens) {
  const std::int64_t H = config_.hidden_size;
  k::Linear(hidden_.data(), x, k, w, bias, num_tokens, k, H, pool_);
  return collectives_.AllReduceSum(hidden_.data(), num_tokens * H, DType::kFloat32, nullptr);
}

Status Transformer::LmHead(float* logits, const float* x, std::int64_t rows) {
  const std::int64_t H = config_.hidden_size, V = config_.vocab_size;
  const std::int64_t v0 = shard_.vocab_begin, n = shard_.vocab_end - shard_.vocab_begin;
  if (n == V) {
    k::Linear(logits, x, H, weights_.lm_head, WeightPtr(), rows, H, V, pool_);
  } else {
    // The kernel writes whole rows: this rank's columns go through a buffer of their own.
    Grow(vocab_slice_, rows * n);
    k::Linear(vocab_slice_.data(), x, H, weights_.lm_head, WeightPtr(), rows, H, n, pool_);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::memcpy(logits + r * V + v0, vocab_slice_.data() + r * n,
                  static_cast<std::size_t>(n) * sizeof(float));
    }
  }
  return collectives_.AllGatherColumns(logits, rows, V, v0, v0 + n, nullptr);
}

std::int64_t Transformer::workspace_bytes() const {
  std::size_t n = 0;
  for (const auto* v :
       {&residual_, &normed_, &hidden_, &qkv_, &attn_, &mlp_, &mlp_act_, &logit_in_, &vocab_slice_})
    n += v->capacity();
  n += inv_freq_.capacity() + seq_inv_freq_.capacity();
  return static_cast<std::int64_t>(n * sizeof(float));
}

}  // namespace inflight::model
