// The CUDA runner's weight set: one shard's tensors (model_shard.h) from its rank file, converted
// to the activation dtype and laid out in one device allocation.
#pragma once

#include <string>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"
#include "kernels/cuda/quant_weight.h"
#include "model/cuda_buffer.h"
#include "model/engine_config.h"
#include "model/model_shard.h"

namespace inflight::model {

// Device pointers of one layer's tensors (transformer_weights.h's LayerWeights); null: absent.
// mlp_in is gate_up (swiglu) or fc (gelu_new).
struct DeviceLayer {
  const void *attn_norm = nullptr, *attn_norm_bias = nullptr, *qkv = nullptr, *qkv_bias = nullptr,
             *q_norm = nullptr, *k_norm = nullptr, *attn_out = nullptr, *attn_out_bias = nullptr,
             *mlp_norm = nullptr, *mlp_norm_bias = nullptr, *mlp_in = nullptr,
             *mlp_in_bias = nullptr, *down = nullptr, *down_bias = nullptr;
  // A quantized engine's decoder linears (kernels/cuda/quant_weight.h; qkv, attn_out, mlp_in and
  // down above are then null): codes, scales, zero points and g_idx as the rank file stores them.
  kernels::cuda::QuantWeight qkv_q, attn_out_q, mlp_in_q, down_q;
  // An FP8 KV cache's scales of this layer (layers.<i>.kv_cache_scale; 1 without one).
  float k_cache_scale = 1.0f, v_cache_scale = 1.0f;
};

struct CudaWeights {
  DeviceBuffer buffer;  // every tensor below, back to back
  const void* embed = nullptr;
  const void* pos_embed = nullptr;
  const void* final_norm = nullptr;
  const void* final_norm_bias = nullptr;
  const void* lm_head = nullptr;    // the shard's vocabulary rows; into embed when tied
  std::vector<DeviceLayer> layers;  // the shard's layers, first_layer first
  DeviceBuffer inv_freq;            // [head_dim / 2] fp32, rope only
};

// Loads <engine_dir>/<shard.file_name()> onto the current device in `dtype` (fp16 or bf16); a
// quantized engine's decoder linears keep their stored parts (DeviceLayer::*_q).
// Errors: the file's (missing tensors, shapes), or not enough device memory (need, free, total).
Status LoadCudaWeights(const std::string& engine_dir, const EngineConfig& config,
                       const ModelShard& shard, DType dtype, CudaWeights& weights);

}  // namespace inflight::model
