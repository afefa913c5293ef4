#include "model/transformer_weights.h"

#include <cstring>
#include <string>

#include "kernels/cpu/dequantize.h"

namespace inflight::model {
namespace {

class Binder {
 public:
  explicit Binder(const SafetensorsFile& file) : file_(file) {}

  // Looks up `name` and checks its shape; `required` false returns an empty pointer when absent.
  Status Bind(const std::string& name, const std::vector<std::int64_t>& shape, bool required,
              WeightPtr* out) {
    const TensorInfo* t = file_.Find(name);
    if (t == nullptr) {
      if (!required) return Status::Ok();
      return NotFound(file_.path() + ": tensor \"" + name + "\" is missing (expected shape " +
                      ShapeToString(shape) + ")");
    }
    if (t->shape != shape) {
      return InvalidArgument(file_.path() + ": tensor \"" + name + "\" has shape " +
                             ShapeToString(t->shape) + ", expected " + ShapeToString(shape));
    }
    if (!kernels::cpu::IsWeightDType(t->dtype)) {
      return InvalidArgument(file_.path() + ": tensor \"" + name + "\" has dtype " +
                             DTypeName(t->dtype) + ", expected one of: float32, float16, bfloat16");
    }
    *out = WeightPtr(t->data, t->dtype);
    num_bytes_ += static_cast<std::int64_t>(t->nbytes);
    return Status::Ok();
  }
  // Rows [row_begin, row_end) of the required 2-D tensor `name` of `shape`.
  Status BindRows(const std::string& name, const std::vector<std::int64_t>& shape,
                  std::int64_t row_begin, std::int64_t row_end, WeightPtr* out) {
    WeightPtr whole;
    const std::int64_t bytes_before = num_bytes_;
    RETURN_IF_ERROR(Bind(name, shape, true, &whole));
    const std::int64_t row_bytes = shape[1] * static_cast<std::int64_t>(DTypeSize(whole.dtype));
    *out = WeightPtr(static_cast<const char*>(whole.data) + row_begin * row_bytes, whole.dtype);
    num_bytes_ = bytes_before + (row_end - row_begin) * row_bytes;
    return Status::Ok();
  }
  std::int64_t num_bytes() const { return num_bytes_; }

  // The tensor `name` of exactly `dtype` and `shape`.
  Result<const TensorInfo*> BindRaw(const std::string& name, DType dtype,
                                    const std::vector<std::int64_t>& shape) {
    const TensorInfo* t = file_.Find(name);
    if (t == nullptr) {
      return NotFound(file_.path() + ": tensor \"" + name + "\" is missing (expected " +
                      DTypeName(dtype) + " " + ShapeToString(shape) + ")");
    }
    if (t->shape != shape || t->dtype != dtype) {
      return InvalidArgument(file_.path() + ": tensor \"" + name + "\" is " + DTypeName(t->dtype) +
                             " " + ShapeToString(t->shape) + ", expected " + DTypeName(dtype) +
                             " " + ShapeToString(shape));
    }
    num_bytes_ += static_cast<std::int64_t>(t->nbytes);
    return t;
  }

 private:
  const SafetensorsFile& file_;
  std::int64_t num_bytes_ = 0;
};

// The linear `linear` ("layers.0.qkv") of [rows, cols]: its float weight, or, in a quantized
// engine, its parts dequantized into a buffer `w` keeps (docs/engine_format.md, "Quantization").
// kKeepCodes: the parts go to `parts` instead.
Status BindLinear(const EngineConfig& c, Binder& b, const std::string& linear, std::int64_t rows,
                  std::int64_t cols, std::int64_t full_cols, TransformerWeights& w, WeightPtr* out,
                  float* input_scale, QuantizedLinears mode, QuantizedLinearParts* parts) {
  const QuantConfig& q = c.quant;
  if (!q.quantized_weights()) return b.Bind(linear + ".weight", {rows, cols}, true, out);
  // NOTE: with act-order the scale groups cover the whole linear's inputs (quant_plan.cc).
  const std::int64_t groups = q.NumGroups(q.has_group_index ? full_cols : cols);
  auto shape = [&](QuantPart p) { return QuantPartShape(q, p, rows, cols, groups); };
  auto part = [&](QuantPart p) -> Result<const TensorInfo*> {
    return b.BindRaw(linear + "." + QuantPartSuffix(p), QuantPartDType(q, p), shape(p));
  };
  kernels::cpu::QuantizedWeightView v;
  v.kind = q.quant_algo == QuantAlgo::kFp8      ? kernels::cpu::QuantizedWeightKind::kFp8E4M3
           : q.quant_algo == QuantAlgo::kInt8Wo ? kernels::cpu::QuantizedWeightKind::kInt8
                                                : kernels::cpu::QuantizedWeightKind::kInt4;
  ASSIGN_OR_RETURN(const TensorInfo* codes, part(QuantPart::kWeight));
  v.codes = reinterpret_cast<const std::uint8_t*>(codes->data);
  ASSIGN_OR_RETURN(const TensorInfo* scales, part(QuantPart::kWeightScale));
  v.scales = reinterpret_cast<const float*>(scales->data);
  v.per_tensor = q.weight_granularity == WeightScaleGranularity::kPerTensor;
  v.num_groups = groups;
  v.group_size = q.weight_granularity == WeightScaleGranularity::kPerGroup ? q.group_size : 0;
  if (q.has_zero_point) {
    ASSIGN_OR_RETURN(const TensorInfo* zeros, part(QuantPart::kWeightZero));
    v.zeros = reinterpret_cast<const std::uint8_t*>(zeros->data);
  }
  if (q.has_group_index) {
    ASSIGN_OR_RETURN(const TensorInfo* g_idx, part(QuantPart::kGroupIndex));
    v.g_idx = reinterpret_cast<const std::int32_t*>(g_idx->data);
    for (std::int64_t i = 0; i < cols; ++i) {
      if (v.g_idx[i] < 0 || v.g_idx[i] >= groups) {
        return InvalidArgument(linear + ".g_idx[" + std::to_string(i) + "] is " +
                               std::to_string(v.g_idx[i]) + ", outside [0, " +
                               std::to_string(groups) + ")");
      }
    }
  }
  if (q.activation_scaling == ActivationScaling::kStatic) {
    ASSIGN_OR_RETURN(const TensorInfo* s, part(QuantPart::kInputScale));
    std::memcpy(input_scale, s->data, sizeof(float));
    if (!(*input_scale > 0.0f)) {
      return InvalidArgument(linear + ".input_scale is " + std::to_string(*input_scale) +
                             ", must be > 0");
    }
  }
  if (mode == QuantizedLinears::kKeepCodes) {
    parts->view = v;
    parts->rows = rows;
    parts->cols = cols;
    parts->code_bytes = static_cast<std::int64_t>(codes->nbytes);
    parts->num_scales = static_cast<std::int64_t>(scales->nbytes / sizeof(float));
    parts->num_zeros = v.zeros != nullptr ? rows * groups : 0;
    parts->num_g_idx = v.g_idx != nullptr ? cols : 0;
    return Status::Ok();
  }
  auto buffer = std::make_unique<float[]>(static_cast<std::size_t>(rows * cols));
  kernels::cpu::DequantizeWeight(v, rows, cols, buffer.get(), nullptr);
  *out = WeightPtr(buffer.get());
  w.dequantized.push_back(std::move(buffer));
  w.num_bytes += rows * cols * static_cast<std::int64_t>(sizeof(float));
  return Status::Ok();
}

}  // namespace

Result<TransformerWeights> BindTransformerWeights(const EngineConfig& c, const ModelShard& shard,
                                                  const SafetensorsFile& file,
                                                  QuantizedLinears quantized) {
  Binder b(file);
  TransformerWeights w;
  const std::int64_t h = c.hidden_size, v = c.vocab_size, inter = shard.intermediate_size;
  const std::int64_t q_dim = shard.q_dim(c.head_dim), qkv_rows = shard.qkv_rows(c.head_dim);
  // NOTE: a tied lm_head is embed's rows, so the last stage binds embed too.
  if (shard.first_stage() || (shard.last_stage() && c.tie_word_embeddings)) {
    RETURN_IF_ERROR(b.Bind("embed.weight", {v, h}, true, &w.embed));
  }
  if (shard.first_stage() && c.position_embedding == PositionEmbedding::kLearned) {
    RETURN_IF_ERROR(b.Bind("pos_embed.weight", {c.max_position_embeddings, h}, true, &w.pos_embed));
  }
  for (std::int64_t i = shard.first_layer; i < shard.last_layer; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    LayerWeights l;
    RETURN_IF_ERROR(b.Bind(p + "attn_norm.weight", {h}, true, &l.attn_norm));
    if (c.norm_bias) RETURN_IF_ERROR(b.Bind(p + "attn_norm.bias", {h}, true, &l.attn_norm_bias));
    RETURN_IF_ERROR(BindLinear(c, b, p + "qkv", qkv_rows, h, h, w, &l.qkv, &l.qkv_input_scale,
                               quantized, &l.qkv_quant));
    if (c.qkv_bias) RETURN_IF_ERROR(b.Bind(p + "qkv.bias", {qkv_rows}, true, &l.qkv_bias));
    if (c.qk_norm) {
      RETURN_IF_ERROR(b.Bind(p + "q_norm.weight", {c.head_dim}, true, &l.q_norm));
      RETURN_IF_ERROR(b.Bind(p + "k_norm.weight", {c.head_dim}, true, &l.k_norm));
    }
    RETURN_IF_ERROR(BindLinear(c, b, p + "attn_out", h, q_dim, c.num_attention_heads * c.head_dim,
                               w, &l.attn_out, &l.attn_out_input_scale, quantized,
                               &l.attn_out_quant));
    if (c.attn_out_bias) RETURN_IF_ERROR(b.Bind(p + "attn_out.bias", {h}, true, &l.attn_out_bias));
    RETURN_IF_ERROR(b.Bind(p + "mlp_norm.weight", {h}, true, &l.mlp_norm));
    if (c.norm_bias) RETURN_IF_ERROR(b.Bind(p + "mlp_norm.bias", {h}, true, &l.mlp_norm_bias));
    if (c.activation == Activation::kSwiGlu) {
      RETURN_IF_ERROR(BindLinear(c, b, p + "gate_up", 2 * inter, h, h, w, &l.gate_up,
                                 &l.mlp_in_input_scale, quantized, &l.gate_up_quant));
      // NOTE: Llama's mlp_bias also puts biases on gate_proj and up_proj.
      if (c.mlp_bias)
        RETURN_IF_ERROR(b.Bind(p + "gate_up.bias", {2 * inter}, true, &l.gate_up_bias));
    } else {
      RETURN_IF_ERROR(BindLinear(c, b, p + "fc", inter, h, h, w, &l.fc, &l.mlp_in_input_scale,
                                 quantized, &l.fc_quant));
      if (c.mlp_bias) RETURN_IF_ERROR(b.Bind(p + "fc.bias", {inter}, true, &l.fc_bias));
    }
    RETURN_IF_ERROR(BindLinear(c, b, p + "down", h, inter, c.intermediate_size, w, &l.down,
                               &l.down_input_scale, quantized, &l.down_quant));
    if (c.quant.kv_cache_fp8) {
      ASSIGN_OR_RETURN(const TensorInfo* kv, b.BindRaw(p + "kv_cache_scale", DType::kFloat32, {2}));
      std::memcpy(&l.k_cache_scale, kv->data, sizeof(float));
      std::memcpy(&l.v_cache_scale, kv->data + sizeof(float), sizeof(float));
      if (!(l.k_cache_scale > 0.0f) || !(l.v_cache_scale > 0.0f)) {
        return InvalidArgument(p + "kv_cache_scale is [" + std::to_string(l.k_cache_scale) + ", " +
                               std::to_string(l.v_cache_scale) + "], both must be > 0");
      }
    }
    if (c.mlp_bias) RETURN_IF_ERROR(b.Bind(p + "down.bias", {h}, true, &l.down_bias));
    w.layers.push_back(l);
  }
  if (shard.last_stage()) {
    RETURN_IF_ERROR(b.Bind("final_norm.weight", {h}, true, &w.final_norm));
    if (c.norm_bias) RETURN_IF_ERROR(b.Bind("final_norm.bias", {h}, true, &w.final_norm_bias));
    if (c.tie_word_embeddings) {
      const std::int64_t row_bytes = h * static_cast<std::int64_t>(DTypeSize(w.embed.dtype));
      w.lm_head = WeightPtr(static_cast<const char*>(w.embed.data) + shard.vocab_begin * row_bytes,
                            w.embed.dtype);
    } else {
      RETURN_IF_ERROR(
          b.BindRows("lm_head.weight", {v, h}, shard.vocab_begin, shard.vocab_end, &w.lm_head));
    }
  }
  w.num_bytes += b.num_bytes();
  return w;
}

bool SharesOneFp8Scale(const QuantizedLinearParts& p) {
  std::int64_t end = 0;
  return Fp8ScaleRuns(p, 1, &end) == 1;
}

int Fp8ScaleRuns(const QuantizedLinearParts& p, int max_runs, std::int64_t* ends) {
  const kernels::cpu::QuantizedWeightView& v = p.view;
  if (v.kind != kernels::cpu::QuantizedWeightKind::kFp8E4M3 || v.num_groups != 1 ||
      v.scales == nullptr || p.num_scales < 1) {
    return 0;
  }
  int runs = 0;
  for (std::int64_t i = 1; i <= p.num_scales; ++i) {
    // NOTE: != is true for NaN, so a NaN scale is a run of its own
    if (i == p.num_scales || v.scales[i] != v.scales[i - 1]) {
      if (runs == max_runs) return 0;
      ends[runs++] = i;
    }
  }
  return runs;
}

}  // namespace inflight::model
