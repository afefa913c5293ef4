#include "model/cuda_weights.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/env_switch.h"
#include "model/cuda_status.h"
#include "model/rank_weights.h"
#include "model/rope_frequencies.h"
#include "model/safetensors.h"
#include "model/transformer_weights.h"

namespace inflight::model {

Status LoadCudaWeights(const std::string& engine_dir, const EngineConfig& config,
                       const ModelShard& shard, DType dtype, CudaWeights& weights) {
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                   OpenRankWeights(engine_dir, config, shard));
  ASSIGN_OR_RETURN(TransformerWeights w,
                   BindTransformerWeights(config, shard, *file, QuantizedLinears::kKeepCodes));
  const EngineConfig& c = config;
  const std::int64_t H = c.hidden_size, q_dim = shard.q_dim(c.head_dim);
  const std::int64_t qkv_rows = shard.qkv_rows(c.head_dim), inter = shard.intermediate_size;
  const bool swiglu = c.activation == Activation::kSwiGlu;
  const std::int64_t mlp_rows = swiglu ? 2 * inter : inter;

  // Every tensor (host pointer, element count), laid out back to back in one device buffer.
  struct Item {
    WeightPtr src;
    std::int64_t n;
    const void** dst;
  };
  std::vector<Item> items;
  const auto add = [&](WeightPtr p, std::int64_t n, const void** dst) {
    if (p) items.push_back({p, n, dst});
  };
  // A quantized linear's parts, copied byte for byte.
  struct RawItem {
    const void* src;
    std::int64_t bytes;
    std::function<void(const char*)> set;  // points the QuantWeight field at the device copy
  };
  std::vector<RawItem> raw_items;
  const auto add_quant = [&](const QuantizedLinearParts& p, kernels::cuda::QuantWeight* q) {
    if (!p.present()) return;
    q->kind = p.view.kind == kernels::cpu::QuantizedWeightKind::kFp8E4M3
                  ? kernels::cuda::QuantWeightKind::kFp8E4M3
              : p.view.kind == kernels::cpu::QuantizedWeightKind::kInt8
                  ? kernels::cuda::QuantWeightKind::kInt8
                  : kernels::cuda::QuantWeightKind::kInt4;
    q->per_tensor = p.view.per_tensor || SharesOneFp8Scale(p);
    // INFLIGHT_FP8_SCALAR_RUNS=0: such a linear takes the epilogue way (A/B comparisons).
    static const bool scalar_runs = EnvSwitchOn("INFLIGHT_FP8_SCALAR_RUNS");
    if (!q->per_tensor && scalar_runs) {
      const int runs =
          Fp8ScaleRuns(p, kernels::cuda::QuantWeight::kMaxScalarRuns, q->scalar_run_ends);
      q->num_scalar_runs = runs > 1 ? runs : 0;
    }
    q->num_groups = p.view.num_groups;
    q->group_size = p.view.group_size;
    raw_items.push_back({p.view.codes, p.code_bytes, [q](const char* d) {
                           q->codes = reinterpret_cast<const std::uint8_t*>(d);
                         }});
    raw_items.push_back({p.view.scales, p.num_scales * 4,
                         [q](const char* d) { q->scales = reinterpret_cast<const float*>(d); }});
    if (p.num_zeros > 0) {
      raw_items.push_back({p.view.zeros, p.num_zeros, [q](const char* d) {
                             q->zeros = reinterpret_cast<const std::uint8_t*>(d);
                           }});
    }
    if (p.num_g_idx > 0) {
      raw_items.push_back({p.view.g_idx, p.num_g_idx * 4, [q](const char* d) {
                             q->g_idx = reinterpret_cast<const std::int32_t*>(d);
                           }});
    }
  };
  add(w.embed, c.vocab_size * H, &weights.embed);
  add(w.pos_embed, c.max_position_embeddings * H, &weights.pos_embed);
  add(w.final_norm, H, &weights.final_norm);
  add(w.final_norm_bias, H, &weights.final_norm_bias);
  weights.layers.resize(w.layers.size());
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    DeviceLayer& d = weights.layers[i];
    add(l.attn_norm, H, &d.attn_norm);
    add(l.attn_norm_bias, H, &d.attn_norm_bias);
    add(l.qkv, qkv_rows * H, &d.qkv);
    add(l.qkv_bias, qkv_rows, &d.qkv_bias);
    add(l.q_norm, c.head_dim, &d.q_norm);
    add(l.k_norm, c.head_dim, &d.k_norm);
    add(l.attn_out, H * q_dim, &d.attn_out);
    add(l.attn_out_bias, H, &d.attn_out_bias);
    add(l.mlp_norm, H, &d.mlp_norm);
    add(l.mlp_norm_bias, H, &d.mlp_norm_bias);
    add(swiglu ? l.gate_up : l.fc, mlp_rows * H, &d.mlp_in);
    add(swiglu ? l.gate_up_bias : l.fc_bias, mlp_rows, &d.mlp_in_bias);
    add(l.down, H * inter, &d.down);
    add(l.down_bias, H, &d.down_bias);
    add_quant(l.qkv_quant, &d.qkv_q);
    add_quant(l.attn_out_quant, &d.attn_out_q);
    add_quant(swiglu ? l.gate_up_quant : l.fc_quant, &d.mlp_in_q);
    add_quant(l.down_quant, &d.down_q);
    d.qkv_q.input_scale = l.qkv_input_scale;
    d.attn_out_q.input_scale = l.attn_out_input_scale;
    d.mlp_in_q.input_scale = l.mlp_in_input_scale;
    d.down_q.input_scale = l.down_input_scale;
    d.k_cache_scale = l.k_cache_scale;
    d.v_cache_scale = l.v_cache_scale;
  }
  // Tied: lm_head is embed's rows [vocab_begin, vocab_end), read in place.
  const bool tied = c.tie_word_embeddings && w.embed;
  if (!tied) add(w.lm_head, (shard.vocab_end - shard.vocab_begin) * H, &weights.lm_head);

  const std::int64_t elem = static_cast<std::int64_t>(DTypeSize(dtype));
  std::int64_t total = 0;
  std::vector<std::int64_t> offsets;
  for (const Item& it : items) {
    offsets.push_back(total);
    total += (it.n * elem + 255) / 256 * 256;  // 256-byte aligned for cuBLASLt
  }
  for (const RawItem& it : raw_items) {
    offsets.push_back(total);
    total += (it.bytes + 255) / 256 * 256;  // and for the quantized GEMV's 16-byte loads
  }
  std::size_t free_b = 0, total_b = 0;
  CUDA_RETURN(cudaMemGetInfo(&free_b, &total_b));
  if (total > static_cast<std::int64_t>(free_b)) {
    return Unavailable("not enough device memory for the weights of " + engine_dir + ": need " +
                       MiB(total) + ", " + MiB(static_cast<std::int64_t>(free_b)) + " free of " +
                       MiB(static_cast<std::int64_t>(total_b)));
  }
  RETURN_IF_ERROR(weights.buffer.Allocate(total));
  std::vector<float> staging_f;
  std::vector<std::uint16_t> staging;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    char* dst = weights.buffer.get<char>() + offsets[i];
    *it.dst = dst;
    if (it.src.dtype == dtype) {
      // The file holds the device's dtype: its bytes go as they are. Through fp32 and back (the
      // same bytes) costs ~1.3 ns an element on one core: ~11 s of an 8B engine's load.
      CUDA_RETURN(cudaMemcpy(dst, it.src.data, static_cast<std::size_t>(it.n * elem),
                             cudaMemcpyHostToDevice));
      continue;
    }
    staging_f.resize(static_cast<std::size_t>(it.n));
    it.src.LoadRange(0, it.n, staging_f.data());
    staging.resize(static_cast<std::size_t>(it.n));
    ConvertFromFloat(dtype, staging_f.data(), staging.data(), staging.size());
    CUDA_RETURN(cudaMemcpy(dst, staging.data(), staging.size() * 2, cudaMemcpyHostToDevice));
  }
  for (std::size_t i = 0; i < raw_items.size(); ++i) {
    const RawItem& it = raw_items[i];
    char* dst = weights.buffer.get<char>() + offsets[items.size() + i];
    CUDA_RETURN(
        cudaMemcpy(dst, it.src, static_cast<std::size_t>(it.bytes), cudaMemcpyHostToDevice));
    it.set(dst);
  }
  if (tied)
    weights.lm_head = static_cast<const char*>(weights.embed) + shard.vocab_begin * H * elem;

  if (const std::vector<float> inv = RopeInvFrequencies(c); !inv.empty()) {
    RETURN_IF_ERROR(
        weights.inv_freq.Allocate(static_cast<std::int64_t>(inv.size() * sizeof(float))));
    CUDA_RETURN(cudaMemcpy(weights.inv_freq.get(), inv.data(), inv.size() * sizeof(float),
                           cudaMemcpyHostToDevice));
  }
  return Status::Ok();
}

}  // namespace inflight::model
