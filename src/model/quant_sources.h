// The sources of quantized linears for the builder (model/quant_plan.h):
//   - a float checkpoint quantized at build time (inflight-build --qformat);
//   - pre-quantized checkpoints as their tools write them (model/hf_quant_config.h for the
//     settings): FP8 E4M3 weights with weight_scale / input_scale (compressed-tensors, ModelOpt),
//     AutoAWQ's GEMM packing, AutoGPTQ's packing.
// The unpackers are exposed for the tests, which pack random data the way those tools do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/checkpoint_index.h"
#include "model/hf_quant_config.h"
#include "model/quant_plan.h"
#include "model/static_fp8_scales.h"

namespace inflight::model {

// --qformat: each checkpoint weight quantized whole (before tensor-parallel slicing, so every
// tp_size gives the same values). KV cache scales 1. With `static_fp8` (--calib_dataset): FP8
// weights per tensor, one scale for the weights fused into one GEMM, and the static scales planned
// there for inputs and the KV cache.
std::unique_ptr<QuantizedLinearSource> MakeBuildTimeQuantizer(
    const CheckpointIndex& checkpoint, const QuantConfig& quant,
    std::shared_ptr<const StaticFp8Scales> static_fp8 = nullptr);

// The float weights the build-time quantizer reads, by Hugging Face name and [out, in] shape:
// `check` looks without reading (a missing tensor or another shape is an error naming it), `read`
// resizes `out` to the weight and fills it as float32 (from the weights' own dtype, as a
// checkpoint holds them); `out` is a reused buffer.
struct FloatWeightSource {
  std::function<Status(const std::string& name, const std::vector<std::int64_t>& shape)> check;
  std::function<Status(const std::string& name, const std::vector<std::int64_t>& shape,
                       std::vector<float>* out)>
      read;
};
// The same quantizer over any float source: the random engine's generated weights
// (model/random_engine.h) quantize to the bytes their written checkpoint would.
std::unique_ptr<QuantizedLinearSource> MakeBuildTimeQuantizer(
    FloatWeightSource weights, const QuantConfig& quant,
    std::shared_ptr<const StaticFp8Scales> static_fp8 = nullptr);

// A checkpoint whose linears are stored quantized in `format`'s layout.
std::unique_ptr<QuantizedLinearSource> MakePrequantizedSource(const CheckpointIndex& checkpoint,
                                                              const CheckpointQuantization& format);

// AutoAWQ 0.2.x WQLinear_GEMM (awq/modules/linear/gemm.py, awq/utils/packing_utils.py):
//   qweight int32 [in, out / 8], qzeros int32 [in / group, out / 8], scales [in / group, out].
// Eight 4-bit values an int32 along the output dimension, nibble i (bits 4i..4i+3) holding
// column 8j + kAwqOrder[i]; w[o, i] = (q - z) * s with the group of input i.
inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
QuantizedMatrix UnpackAwqGemm(const std::int32_t* qweight, const std::int32_t* qzeros,
                              const float* scales, std::int64_t in_features,
                              std::int64_t out_features, std::int64_t group_size);

// AutoGPTQ 0.7 (auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py pack()):
//   qweight int32 [in * bits / 32, out]: 32 / bits values along the input dimension, value j of
//     word (r, o) in bits [j * bits, (j + 1) * bits) being input 32 / bits * r + j;
//   qzeros int32 [groups, out * bits / 32]: zero points packed the same way along the output;
//     checkpoint_format "gptq" stores zero - 1 (zeros_minus_one), "gptq_v2" the zero itself;
//   scales [groups, out]; g_idx int32 [in] (nullptr: input i in group i / group_size).
// bits 4 gives int4 codes 0..15; bits 8 gives int8 codes (stored unsigned, shifted by -128, zero
// points likewise, so q - z is unchanged). group_size 0: one group (per channel).
QuantizedMatrix UnpackGptq(const std::int32_t* qweight, const std::int32_t* qzeros,
                           const float* scales, const std::int32_t* g_idx, std::int64_t in_features,
                           std::int64_t out_features, int bits, std::int64_t group_size,
                           bool zeros_minus_one);

}  // namespace inflight::model
