#include "model/cuda_transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "common/env_switch.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/amax.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm_swiglu.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/paged_attention_context.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope_kv_write.h"
#include "model/cuda_status.h"
#include "model/rope_frequencies.h"

namespace inflight::model {

namespace kc = kernels::cuda;

kc::PagedBatch LeadingDecodes(const kc::PagedBatch& batch, std::int32_t num_seqs,
                              std::int32_t max_kv_len) {
  kc::PagedBatch view = batch;
  view.num_seqs = num_seqs;
  view.num_tokens = num_seqs;
  view.max_query_len = num_seqs > 0 ? 1 : 0;
  view.max_kv_len = max_kv_len;
  return view;
}

kc::PagedBatch AfterDecodes(const kc::PagedBatch& batch, std::int32_t skip) {
  kc::PagedBatch view = batch;
  view.num_seqs -= skip;
  view.num_tokens -= skip;
  view.query_start += skip;
  view.num_cached += skip;
  view.block_tables += static_cast<std::ptrdiff_t>(skip) * batch.max_blocks_per_seq;
  return view;
}

CudaTransformer::CudaTransformer(const EngineConfig& config, const ModelShard& shard, DType dtype,
                                 const CudaWeights& weights, const CudaKvCache& kv,
                                 kc::CublasLtGemm& gemm, cudaStream_t stream,
                                 Collectives& collectives, bool fused_swiglu,
                                 std::vector<kc::AttentionWindow> windows)
    : config_(config),
      shard_(shard),
      dtype_(dtype),
      weights_(weights),
      kv_(kv),
      gemm_(gemm),
      stream_(stream),
      collectives_(collectives),
      fused_swiglu_(fused_swiglu),
      rope_scale_(RopeScale(config)),
      windows_(std::move(windows)) {
  for (std::int64_t layer = shard_.first_layer; layer < shard_.last_layer; ++layer) {
    const kc::AttentionWindow& w = windows_[static_cast<std::size_t>(layer)];
    const auto seen = std::find_if(
        distinct_windows_.begin(), distinct_windows_.end(),
        [&](const kc::AttentionWindow& d) { return d.window == w.window && d.sink == w.sink; });
    if (seen == distinct_windows_.end()) {
      distinct_windows_.push_back(w);
      distinct_window_layers_.push_back(1);
    } else {
      ++distinct_window_layers_[static_cast<std::size_t>(seen - distinct_windows_.begin())];
    }
  }
}

std::int64_t CudaTransformer::DecodeWorkspaceBytes(const kc::PagedBatch& decodes) const {
  std::int64_t bytes = 0;
  for (const kc::AttentionWindow& w : distinct_windows_) {
    const std::int32_t partition =
        kc::DecodePartitionTokens(decodes, shard_.num_kv_heads, w, kv_.fp8);
    bytes = std::max(bytes, static_cast<std::int64_t>(kc::PagedAttentionDecodeWorkspaceBytes(
                                decodes, shard_.num_q_heads, config_.head_dim, partition, w)));
  }
  return bytes;
}

double CudaTransformer::MeanRowKeys(std::int64_t first, std::int64_t n) const {
  double keys = 0;
  for (std::size_t i = 0; i < distinct_windows_.size(); ++i) {
    keys +=
        static_cast<double>(distinct_windows_[i].SumVisible(first, n) * distinct_window_layers_[i]);
  }
  return keys / static_cast<double>(shard_.num_layers());
}

CudaTransformer::~CudaTransformer() {
  for (cudaEvent_t ev : {attn_fork_, attn_join_}) {
    if (ev != nullptr) cudaEventDestroy(ev);
  }
}

Status CudaTransformer::AllocateActivations(std::int64_t max_tokens) {
  const EngineConfig& c = config_;
  const std::int64_t T = max_tokens, H = c.hidden_size,
                     e = static_cast<std::int64_t>(DTypeSize(dtype_));
  const std::int64_t inter = shard_.intermediate_size;
  const bool swiglu = c.activation == Activation::kSwiGlu;
  const std::int64_t R = std::min<std::int64_t>(kLogitChunk, std::max(c.build.max_batch_size, 1));
  logit_chunk_ = R;
  max_tokens_ = T;
  struct {
    DeviceBuffer* buf;
    std::int64_t bytes;
  } plan[] = {
      {&residual_, T * H * e},
      {&normed_, T * H * e},
      {&qkv_, T * shard_.qkv_rows(c.head_dim) * e},
      {&attn_, T * shard_.q_dim(c.head_dim) * e},
      {&mlp_, T * (swiglu ? 2 * inter : inter) * e},
      {&mlp_act_, T * inter * e},
      {&logit_x_, R * H * e},
      {&logits_, R * c.vocab_size * 4},
  };
  activation_bytes_ = 0;
  for (auto& p : plan) {
    RETURN_IF_ERROR(p.buf->Allocate(p.bytes));
    activation_bytes_ += p.bytes;
  }
  return AllocateQuantScratch(T);
}

Status CudaTransformer::AllocateQuantScratch(std::int64_t max_tokens) {
  if (weights_.layers.empty() || !weights_.layers.front().qkv_q.present()) return Status::Ok();
  const EngineConfig& c = config_;
  const std::int64_t H = c.hidden_size, inter = shard_.intermediate_size;
  const std::int64_t mlp_rows = c.activation == Activation::kSwiGlu ? 2 * inter : inter;
  // The decoder linears [n, k]: qkv, attn_out, mlp_in, down.
  const std::int64_t shapes[][2] = {
      {shard_.qkv_rows(c.head_dim), H}, {H, shard_.q_dim(c.head_dim)}, {mlp_rows, H}, {H, inter}};
  std::int64_t max_n = 0, max_k = 0, max_nk = 0;
  for (const auto& nk : shapes) {
    max_n = std::max(max_n, nk[0]);
    max_k = std::max(max_k, nk[1]);
    max_nk = std::max(max_nk, nk[0] * nk[1]);
  }
  const kc::QuantWeightKind kind = weights_.layers.front().qkv_q.kind;
  if (kind == kc::QuantWeightKind::kFp8E4M3 && kc::CublasLtFp8Gemm::DeviceSupportsFp8()) {
    fp8_gemm_ = std::make_unique<kc::CublasLtFp8Gemm>();
    RETURN_IF_ERROR(CublasStatus(fp8_gemm_->status(), "cuBLASLt init (FP8 GEMM)"));
  }
  quant_linear_ = std::make_unique<kc::QuantLinear>(gemm_, fp8_gemm_.get());
  RETURN_IF_ERROR(CudaStatus(quant_linear_->prepare_status(), "quantized GEMV set-up"));
  // INFLIGHT_FP8_OUTER_VEC=1: FP8 GEMMs apply their scales in cuBLASLt (where it offers that)
  // rather than in the epilogue kernel; an A/B switch until the device has measured both.
  quant_linear_->set_fp8_outer_vector_scales(EnvSwitchSet("INFLIGHT_FP8_OUTER_VEC"));
  // INFLIGHT_FP8_SCALAR_SCALES=0: per-tensor static linears through the epilogue kernel too (A/B).
  quant_linear_->set_fp8_scalar_scales(EnvSwitchOn("INFLIGHT_FP8_SCALAR_SCALES"));
  const kc::QuantScratchBytes sizes = kc::QuantLinearScratchBytes(
      kind, max_tokens, max_n, max_k, max_nk, static_cast<std::int64_t>(DTypeSize(dtype_)));
  RETURN_IF_ERROR(quant_scratch_buffer_.Allocate(sizes.total()));
  activation_bytes_ += sizes.total();
  char* p = quant_scratch_buffer_.get<char>();
  quant_scratch_.weight = p;
  quant_scratch_.weight_bytes = sizes.weight;
  p += sizes.weight;
  quant_scratch_.act_codes = reinterpret_cast<std::uint8_t*>(p);
  quant_scratch_.act_codes_bytes = sizes.act_codes;
  p += sizes.act_codes;
  quant_scratch_.act_scales = reinterpret_cast<float*>(p);
  quant_scratch_.act_scales_bytes = sizes.act_scales;
  p += sizes.act_scales;
  quant_scratch_.raw_out = p;
  quant_scratch_.raw_out_bytes = sizes.raw_out;
  return Status::Ok();
}

Status CudaTransformer::CreateAttentionSplitEvents() {
  for (cudaEvent_t* ev : {&attn_fork_, &attn_join_}) {
    CUDA_RETURN(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
  }
  return Status::Ok();
}

Status CudaTransformer::Norm(void* out, const void* x, const void* w, const void* b,
                             std::int64_t rows) {
  if (config_.norm == NormKind::kRmsNorm) {
    return CudaStatus(kc::RmsNorm(out, x, nullptr, w, dtype_, rows, config_.hidden_size,
                                  config_.norm_eps, stream_),
                      "RmsNorm");
  }
  return CudaStatus(kc::LayerNorm(out, x, nullptr, w, b, dtype_, rows, config_.hidden_size,
                                  config_.norm_eps, stream_),
                    "LayerNorm");
}

Status CudaTransformer::Linear(void* y, const void* x, const void* w, const void* bias,
                               std::int64_t m, std::int64_t n, std::int64_t k) {
  return CublasStatus(gemm_.Linear(y, dtype_, n, x, k, w, bias, dtype_, m, n, k, stream_),
                      "Linear");
}

Status CudaTransformer::LinearAdd(void* y, const void* x, const void* w, const void* bias,
                                  std::int64_t m, std::int64_t n, std::int64_t k) {
  return CublasStatus(gemm_.LinearAdd(y, dtype_, n, x, k, w, bias, dtype_, m, n, k, stream_),
                      "LinearAdd");
}

Status CudaTransformer::DecoderLinear(void* y, void* x, const kc::QuantWeight& q, const void* w,
                                      const void* bias, std::int64_t m, std::int64_t n,
                                      std::int64_t k, bool accumulate, const char* what) {
  if (!q.present()) {
    return accumulate ? LinearAdd(y, x, w, bias, m, n, k) : Linear(y, x, w, bias, m, n, k);
  }
  if (quant_linear_ == nullptr) return Internal("quantized linear without its scratch");
  return CudaStatus(
      quant_linear_->Run(y, n, x, k, q, bias, dtype_, m, n, k, accumulate, quant_scratch_, stream_),
      what);
}

Status CudaTransformer::RowParallelAdd(void* x, const kc::QuantWeight& q, const void* w,
                                       const void* bias, std::int64_t m, std::int64_t k,
                                       const char* what) {
  const std::int64_t H = config_.hidden_size;
  // Rank 0 adds into the residual stream; the others write their partial over their copy.
  RETURN_IF_ERROR(
      DecoderLinear(residual_.get(), x, q, w, bias, m, H, k, shard_.tp_rank == 0, what));
  return collectives_.AllReduceSum(residual_.get(), m * H, dtype_, stream_);
}

Status CudaTransformer::LmHead(std::int64_t rows) {
  const std::int64_t H = config_.hidden_size, V = config_.vocab_size;
  const std::int64_t v0 = shard_.vocab_begin, v1 = shard_.vocab_end;
  RETURN_IF_ERROR(
      CublasStatus(gemm_.Linear(logits_.get<float>() + v0, DType::kFloat32, V, logit_x_.get(), H,
                                weights_.lm_head, nullptr, dtype_, rows, v1 - v0, H, stream_),
                   "lm_head"));
  return collectives_.AllGatherColumns(logits_.get<float>(), rows, V, v0, v1, stream_);
}

Status CudaTransformer::Observe(std::size_t i, AmaxPoint p, const void* x, std::int64_t rows,
                                std::int64_t cols, std::int64_t stride) {
  if (amax_bits_ == nullptr) return Status::Ok();
  // Slots are the engine's layers: a pipeline stage's layer i is the engine's first_layer + i.
  const std::size_t layer = static_cast<std::size_t>(shard_.first_layer) + i;
  unsigned* slot = amax_bits_ + layer * kNumAmaxPoints + static_cast<std::size_t>(p);
  return CudaStatus(kc::FoldAbsMax(slot, x, rows, cols, stride, dtype_, stream_), "FoldAbsMax");
}

Status CudaTransformer::Enqueue(const Launch& launch) {
  const EngineConfig& c = config_;
  const kc::PagedBatch& batch = launch.batch;
  const std::int32_t T = batch.num_tokens;
  const std::int64_t nq = shard_.num_q_heads, nkv = shard_.num_kv_heads;
  const kc::PagedKvShape shape{nkv, c.build.tokens_per_block, c.head_dim};

  const std::int64_t H = c.hidden_size, hd = c.head_dim;
  const std::int64_t q_dim = nq * hd, qkv_dim = shard_.qkv_rows(hd),
                     inter = shard_.intermediate_size;
  const bool swiglu = c.activation == Activation::kSwiGlu;
  const std::int64_t e = static_cast<std::int64_t>(DTypeSize(dtype_));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const kc::PagedBatch decodes =
      LeadingDecodes(batch, launch.num_decode_seqs, launch.decode_max_kv_len);
  const kc::PagedBatch contexts = AfterDecodes(batch, launch.num_decode_seqs);

  if (shard_.first_stage()) {
    CUDA_RETURN(kc::EmbeddingGather(residual_.get(), launch.token_ids, T, weights_.embed, H,
                                    weights_.pos_embed, launch.positions, dtype_, stream_));
  } else {
    RETURN_IF_ERROR(collectives_.ReceiveFromPreviousStage(residual_.get(), T * H, dtype_, stream_));
  }
  for (std::size_t i = 0; i < weights_.layers.size(); ++i) {
    const DeviceLayer& l = weights_.layers[i];
    ASSIGN_OR_RETURN(const bool fp8_qkv, Fp8NormQkv(l, T, qkv_dim));
    if (!fp8_qkv) {
      RETURN_IF_ERROR(Norm(normed_.get(), residual_.get(), l.attn_norm, l.attn_norm_bias, T));
      RETURN_IF_ERROR(Observe(i, AmaxPoint::kQkvInput, normed_.get(), T, H, H));
      RETURN_IF_ERROR(DecoderLinear(qkv_.get(), normed_.get(), l.qkv_q, l.qkv, l.qkv_bias, T,
                                    qkv_dim, H, false, "quantized linear qkv"));
    }
    char* q = qkv_.get<char>();
    char* k = q + q_dim * e;
    char* v = k + nkv * hd * e;
    const std::int64_t pool_bytes = kv_.pool_elems * kv_.elem_bytes();
    char* k_pool = kv_.buffer.get<char>() + static_cast<std::int64_t>(2 * i) * pool_bytes;
    char* v_pool = k_pool + pool_bytes;
    const kc::KvFp8Scales kv_scales{l.k_cache_scale, l.v_cache_scale};
    const kc::RopeTable rope{
        launch.rope_inv_freq != nullptr ? launch.rope_inv_freq : weights_.inv_freq.get<float>(),
        launch.rope_inv_freq != nullptr ? static_cast<std::int32_t>(hd / 2) : 0, rope_scale_};
    kc::QkNormWeights qk_norm;
    if (c.qk_norm) qk_norm = {l.q_norm, l.k_norm, c.norm_eps};
    if (kv_.fp8) {
      CUDA_RETURN(kc::RopeKvWriteFp8(q, k, v, qkv_dim, nq, k_pool, v_pool, batch, shape, rope,
                                     qk_norm, dtype_, kv_scales, stream_));
    } else {
      CUDA_RETURN(kc::RopeKvWrite(q, k, v, qkv_dim, nq, k_pool, v_pool, batch, shape, rope, qk_norm,
                                  dtype_, stream_));
    }
    // K as cached: RopeKvWrite leaves the rotated (and normed) rows in place.
    RETURN_IF_ERROR(Observe(i, AmaxPoint::kKey, k, T, nkv * hd, qkv_dim));
    RETURN_IF_ERROR(Observe(i, AmaxPoint::kValue, v, T, nkv * hd, qkv_dim));
    const kc::AttentionWindow& window = windows_[static_cast<std::size_t>(shard_.first_layer) + i];
    const auto decode_attention = [&](cudaStream_t s) {
      if (kv_.fp8) {
        return kc::PagedAttentionDecodeFp8(attn_.get(), q, qkv_dim, k_pool, v_pool, kv_scales,
                                           decodes, shape, nq, scale, window, dtype_, 0,
                                           launch.decode_ws, launch.decode_ws_bytes, s);
      }
      return kc::PagedAttentionDecode(attn_.get(), q, qkv_dim, k_pool, v_pool, decodes, shape, nq,
                                      scale, window, dtype_, 0, launch.decode_ws,
                                      launch.decode_ws_bytes, s);
    };
    const auto context_attention = [&](cudaStream_t s) {
      if (kv_.fp8) {
        return kc::PagedAttentionContextFp8(attn_.get(), q, qkv_dim, k_pool, v_pool, kv_scales,
                                            contexts, shape, nq, scale, window, dtype_, s);
      }
      return kc::PagedAttentionContext(attn_.get(), q, qkv_dim, k_pool, v_pool, contexts, shape, nq,
                                       scale, window, dtype_, s);
    };
    if (cudaStream_t side = launch.context_stream) {
      CUDA_RETURN(cudaEventRecord(attn_fork_, stream_));
      CUDA_RETURN(cudaStreamWaitEvent(side, attn_fork_, 0));
      CUDA_RETURN(context_attention(side));
      CUDA_RETURN(cudaEventRecord(attn_join_, side));
      CUDA_RETURN(decode_attention(stream_));
      CUDA_RETURN(cudaStreamWaitEvent(stream_, attn_join_, 0));
    } else {
      if (decodes.num_seqs > 0) CUDA_RETURN(decode_attention(stream_));
      if (contexts.num_seqs > 0) CUDA_RETURN(context_attention(stream_));
    }
    RETURN_IF_ERROR(Observe(i, AmaxPoint::kAttnOutInput, attn_.get(), T, q_dim, q_dim));
    RETURN_IF_ERROR(RowParallelAdd(attn_.get(), l.attn_out_q, l.attn_out, l.attn_out_bias, T, q_dim,
                                   "quantized linear attn_out"));
    ASSIGN_OR_RETURN(const bool fp8_mlp, Fp8NormMlp(l, T, inter));
    if (fp8_mlp) continue;
    RETURN_IF_ERROR(Norm(normed_.get(), residual_.get(), l.mlp_norm, l.mlp_norm_bias, T));
    RETURN_IF_ERROR(Observe(i, AmaxPoint::kMlpInput, normed_.get(), T, H, H));
    // The fused gate/up + SwiGLU kernels read float weights; a quantized gate_up goes through its
    // linear, then the SwiGLU kernel.
    const bool float_mlp_in = !l.mlp_in_q.present();
    if (swiglu && float_mlp_in && kc::GemvSupports(dtype_, T, H, H, normed_.get(), l.mlp_in)) {
      // A few rows: the gate/up pass writes the activation directly (no [T, 2 * inter] round trip).
      CUDA_RETURN(kc::GemvSwiGlu(mlp_act_.get(), inter, normed_.get(), H, l.mlp_in, l.mlp_in_bias,
                                 dtype_, T, inter, H, stream_));
    } else if (swiglu && float_mlp_in && fused_swiglu_ && l.mlp_in_bias == nullptr &&
               T >= kFusedSwiGluMinRows &&
               kc::GemmSwiGluSupports(dtype_, T, inter, H, normed_.get(), H, l.mlp_in,
                                      mlp_act_.get(), inter)) {
      CUDA_RETURN(kc::GemmSwiGlu(mlp_act_.get(), inter, normed_.get(), H, l.mlp_in, dtype_, T,
                                 inter, H, stream_));
    } else if (swiglu) {
      // FP8: the GEMM's epilogue does the SwiGLU where it can (no [T, 2 * inter] round trip).
      const cudaError_t fused = float_mlp_in || quant_linear_ == nullptr
                                    ? cudaErrorNotSupported
                                    : quant_linear_->RunSwiGlu(mlp_act_.get(), normed_.get(), H,
                                                               l.mlp_in_q, l.mlp_in_bias, dtype_, T,
                                                               inter, H, quant_scratch_, stream_);
      if (fused != cudaErrorNotSupported) {
        CUDA_RETURN(fused);
      } else {
        RETURN_IF_ERROR(DecoderLinear(mlp_.get(), normed_.get(), l.mlp_in_q, l.mlp_in,
                                      l.mlp_in_bias, T, 2 * inter, H, false,
                                      "quantized linear gate_up"));
        CUDA_RETURN(kc::SwiGlu(mlp_act_.get(), mlp_.get(), dtype_, T, inter, stream_));
      }
    } else {
      RETURN_IF_ERROR(DecoderLinear(mlp_.get(), normed_.get(), l.mlp_in_q, l.mlp_in, l.mlp_in_bias,
                                    T, inter, H, false, "quantized linear fc"));
      CUDA_RETURN(kc::GeluNew(mlp_act_.get(), mlp_.get(), dtype_, T * inter, stream_));
    }
    RETURN_IF_ERROR(Observe(i, AmaxPoint::kDownInput, mlp_act_.get(), T, inter, inter));
    RETURN_IF_ERROR(RowParallelAdd(mlp_act_.get(), l.down_q, l.down, l.down_bias, T, inter,
                                   "quantized linear down"));
  }
  if (!shard_.last_stage()) {
    return collectives_.SendToNextStage(residual_.get(), T * H, dtype_, stream_);
  }

  // Only the wanted rows go through the final norm and lm_head, logit_chunk_ rows at a time: the
  // row gather is the embedding kernel with the activations as its table. Rows [0, R_out) go to the
  // host; rows [R_out, R) are sampled where they are and only their token ids and log-probs come
  // back.
  const std::int64_t R = launch.num_rows, R_out = launch.num_out_rows;
  for (std::int64_t r0 = 0; r0 < R; r0 += logit_chunk_) {
    const std::int64_t n = std::min(logit_chunk_, R - r0);
    if (launch.logit_rows_are_token_rows) {
      // No gather (a decode step's usual case).
      RETURN_IF_ERROR(Norm(logit_x_.get(), residual_.get<char>() + r0 * H * e, weights_.final_norm,
                           weights_.final_norm_bias, n));
    } else {
      CUDA_RETURN(kc::EmbeddingGather(logit_x_.get(), launch.logit_rows + r0, n, residual_.get(), H,
                                      nullptr, nullptr, dtype_, stream_));
      RETURN_IF_ERROR(
          Norm(logit_x_.get(), logit_x_.get(), weights_.final_norm, weights_.final_norm_bias, n));
    }
    RETURN_IF_ERROR(LmHead(n));
    const std::int64_t n_out = std::clamp<std::int64_t>(R_out - r0, 0, n);
    if (n_out > 0) {
      CUDA_RETURN(cudaMemcpyAsync(launch.host_logits + r0 * c.vocab_size, logits_.get(),
                                  static_cast<std::size_t>(n_out * c.vocab_size) * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_));
    }
    if (n_out < n) {
      const std::int64_t j = r0 + n_out - R_out;  // first sampled row of this chunk
      CUDA_RETURN(kc::SampleRows(launch.sampled_ids + j, launch.sampled_log_probs + j,
                                 logits_.get<float>() + n_out * c.vocab_size, n - n_out,
                                 c.vocab_size, c.vocab_size, launch.sampling_params + j,
                                 launch.sampling_lists, stream_));
    }
  }
  return Status::Ok();
}

}  // namespace inflight::model
