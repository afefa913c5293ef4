// The engine's weights as typed pointers for the CPU forward pass, checked against the config.
#pragma once

#include <memory>
#include <vector>

#include "inflight/status.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/weight_ptr.h"
#include "model/engine_config.h"
#include "model/model_shard.h"
#include "model/safetensors.h"

namespace inflight::model {

using kernels::cpu::WeightPtr;

// A quantized linear's stored parts bound in place in the rank file (QuantizedLinears::kKeepCodes):
// the CUDA runner copies them to the device as they are.
struct QuantizedLinearParts {
  kernels::cpu::QuantizedWeightView view;  // host pointers into the rank file
  std::int64_t rows = 0, cols = 0;
  std::int64_t code_bytes = 0;  // of view.codes
  std::int64_t num_scales = 0;  // of view.scales (1 when per_tensor)
  std::int64_t num_zeros = 0;   // of view.zeros (0 when absent)
  std::int64_t num_g_idx = 0;   // of view.g_idx (0 when absent)
  bool present() const { return view.codes != nullptr; }
};

// An FP8 linear whose per-channel scales are all one value: a per-tensor scale the engine format
// expanded (a checkpoint's per-tensor attention-output or down weight; q/k/v or gate/up parts that
// share theirs). The CUDA runner then takes it as per tensor: the same values, and its FP8 GEMM
// applies a scalar weight scale itself (kernels/cuda/quant_linear.h set_fp8_scalar_scales).
bool SharesOneFp8Scale(const QuantizedLinearParts& p);
// The runs of one scale an FP8 per-channel linear's rows fall in (a checkpoint's per-tensor q, k
// and v fused into one weight: three): the number of runs, their ends (the last is the row count)
// in ends[0 .. runs); 0 for another kind of linear or more than max_runs runs.
int Fp8ScaleRuns(const QuantizedLinearParts& p, int max_runs, std::int64_t* ends);

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
  // QuantizedLinears::kKeepCodes: the quantized linears' parts (the WeightPtrs above stay null).
  QuantizedLinearParts qkv_quant, attn_out_quant, gate_up_quant, fc_quant, down_quant;
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

// What a quantized engine's decoder linears become: fp32 dequantized copies (the CPU runner), or
// their stored parts bound in place (LayerWeights::*_quant; the CUDA runner's kernels read codes).
enum class QuantizedLinears : std::uint8_t { kDequantize, kKeepCodes };

// Binds every tensor of `shard` that the config calls for from `file` (the shard's rank file),
// which must outlive the result. Errors name the file, the tensor, and the expected vs. found
// shape or dtype.
Result<TransformerWeights> BindTransformerWeights(
    const EngineConfig& config, const ModelShard& shard, const SafetensorsFile& file,
    QuantizedLinears quantized = QuantizedLinears::kDequantize);

}  // namespace inflight::model
