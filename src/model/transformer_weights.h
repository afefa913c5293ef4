// The engine's weights as typed pointers for the CPU forward pass, checked against the config.
#pragma once

#include <memory>
#include <vector>

#include "inflight/status.h"
#include "kernels/cpu/weight_ptr.h"
#include "model/engine_config.h"
#include "model/model_shard.h"
#include "model/safetensors.h"

namespace inflight::model {

using kernels::cpu::WeightPtr;

// Names and shapes as in docs/engine_format.md, of one rank (nq, nkv and inter are the shard's);
// an absent optional weight has null data.
struct LayerWeights {
  WeightPtr attn_norm, attn_norm_bias;
  WeightPtr qkv, qkv_bias;            // [(nq + 2 nkv) hd, hidden], [(nq + 2 nkv) hd]
  WeightPtr q_norm, k_norm;           // [hd] each, qk_norm only
  WeightPtr attn_out, attn_out_bias;  // [hidden, nq hd], [hidden]
  WeightPtr mlp_norm, mlp_norm_bias;
  WeightPtr gate_up, gate_up_bias;  // swiglu: [2 inter, hidden] (gate rows, then up rows)
  WeightPtr fc, fc_bias;            // gelu_new: [inter, hidden]
  WeightPtr down, down_bias;        // [hidden, inter]
  // Quantized engines (EngineConfig::quant): the linears above are the fp32 dequantization of the
  // stored codes. fp8 with static activation scales: each linear's input_scale (0: per token).
  float qkv_input_scale = 0.0f, attn_out_input_scale = 0.0f, mlp_in_input_scale = 0.0f,
        down_input_scale = 0.0f;
  // FP8 KV cache: K and V are stored as e4m3(K / k_cache_scale), e4m3(V / v_cache_scale).
  float k_cache_scale = 1.0f, v_cache_scale = 1.0f;
};

struct TransformerWeights {
  WeightPtr embed;      // [vocab, hidden]; the first stage, or the last with tied embeddings
  WeightPtr pos_embed;  // [max_position_embeddings, hidden], learned positions, first stage only
  WeightPtr final_norm, final_norm_bias;  // the last stage only
  // [vocab_end - vocab_begin, hidden]: the shard's rows of lm_head, or of embed when
  // tie_word_embeddings; the last stage only.
  WeightPtr lm_head;
  std::vector<LayerWeights> layers;  // the shard's layers, first_layer first
  std::int64_t num_bytes = 0;        // of the distinct tensors bound, and of dequantized copies
  // The fp32 dequantized linears of a quantized engine, which the WeightPtrs above point into.
  std::vector<std::unique_ptr<float[]>> dequantized;
};

// Binds every tensor of `shard` that the config calls for from `file` (the shard's rank file),
// which must outlive the result. Errors name the file, the tensor, and the expected vs. found
// shape or dtype.
Result<TransformerWeights> BindTransformerWeights(const EngineConfig& config,
                                                  const ModelShard& shard,
                                                  const SafetensorsFile& file);

}  // namespace inflight::model
