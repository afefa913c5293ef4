// A pre-quantized Hugging Face checkpoint's quantization settings → the engine's QuantConfig, for
// the formats as their tools publish them. Every field that changes the math is honoured or
// refused by name (field, value, what is accepted); bookkeeping fields are left unread and logged.
//
//   config.json "quantization_config":
//     quant_method "compressed-tensors"  llm-compressor / compressed-tensors 0.9-0.12: FP8 E4M3
//                                        weights (strategy tensor | channel), activations static
//                                        per tensor or dynamic per token, kv_cache_scheme FP8
//     quant_method "awq"                 AutoAWQ 0.2.x, version "gemm": 4 bits, zero points, groups
//     quant_method "gptq"                AutoGPTQ 0.7 / optimum GPTQConfig (and GPTQModel's
//                                        checkpoint_format gptq_v2): 4 or 8 bits, groups or one per
//                                        channel, desc_act (g_idx), sym or asym
//     quant_method "modelopt"            the same settings as hf_quant_config.json's "quantization"
//   hf_quant_config.json (NVIDIA ModelOpt 0.19-0.3x export): {"producer": {...}, "quantization":
//     {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8" | null, "exclude_modules": [...]}}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inflight/status.h"
#include "model/quant_config.h"

namespace inflight::model {

enum class CheckpointQuantFormat : std::uint8_t {
  kNone,
  kCompressedTensors,
  kModelOpt,
  kAwq,
  kGptq,
};
const char* CheckpointQuantFormatName(CheckpointQuantFormat f);  // "compressed-tensors", ...

struct CheckpointQuantization {
  CheckpointQuantFormat format = CheckpointQuantFormat::kNone;
  QuantConfig engine;     // the engine's settings (source set to the format name)
  std::int32_t bits = 0;  // awq / gptq
  // GPTQ checkpoint_format "gptq" (AutoGPTQ's v1): qzeros hold zero - 1; "gptq_v2": the zero.
  bool gptq_zeros_minus_one = true;
  // compressed-tensors kv_cache_scheme / ModelOpt kv_cache_quant_algo: the checkpoint has
  // k_scale / v_scale for every layer.
  bool kv_scales_in_checkpoint = false;
  std::vector<std::string> unread_keys;  // "quantization_config.<key>", for the build log
};

// `quantization_config_json`: config.json's "quantization_config" object as JSON text; `where`
// names it in errors ("ckpt/config.json quantization_config").
Result<CheckpointQuantization> ReadQuantizationConfig(const std::string& quantization_config_json,
                                                      const std::string& where);
// The text of ModelOpt's hf_quant_config.json.
Result<CheckpointQuantization> ReadModelOptQuantConfig(const std::string& hf_quant_config_json,
                                                       const std::string& origin);

}  // namespace inflight::model
