#include "model/transformer_weights.h"

#include <string>

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
  std::int64_t num_bytes() const { return num_bytes_; }

 private:
  const SafetensorsFile& file_;
  std::int64_t num_bytes_ = 0;
};

}  // namespace

Result<TransformerWeights> BindTransformerWeights(const EngineConfig& c,
                                                  const SafetensorsFile& file) {
  if (c.tp_size != 1) {
    return Unsupported("the CPU runner loads tp_size 1 engines only; this engine has tp_size " +
                       std::to_string(c.tp_size));
  }
  Binder b(file);
  TransformerWeights w;
  const std::int64_t h = c.hidden_size, v = c.vocab_size, inter = c.intermediate_size;
  const std::int64_t q_dim = c.num_attention_heads * c.head_dim, qkv_rows = c.QkvRows(1);
  RETURN_IF_ERROR(b.Bind("embed.weight", {v, h}, true, &w.embed));
  if (c.position_embedding == PositionEmbedding::kLearned) {
    RETURN_IF_ERROR(b.Bind("pos_embed.weight", {c.max_position_embeddings, h}, true, &w.pos_embed));
  }
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    LayerWeights l;
    RETURN_IF_ERROR(b.Bind(p + "attn_norm.weight", {h}, true, &l.attn_norm));
    if (c.norm_bias) RETURN_IF_ERROR(b.Bind(p + "attn_norm.bias", {h}, true, &l.attn_norm_bias));
    RETURN_IF_ERROR(b.Bind(p + "qkv.weight", {qkv_rows, h}, true, &l.qkv));
    if (c.qkv_bias) RETURN_IF_ERROR(b.Bind(p + "qkv.bias", {qkv_rows}, true, &l.qkv_bias));
    RETURN_IF_ERROR(b.Bind(p + "attn_out.weight", {h, q_dim}, true, &l.attn_out));
    if (c.attn_out_bias) RETURN_IF_ERROR(b.Bind(p + "attn_out.bias", {h}, true, &l.attn_out_bias));
    RETURN_IF_ERROR(b.Bind(p + "mlp_norm.weight", {h}, true, &l.mlp_norm));
    if (c.norm_bias) RETURN_IF_ERROR(b.Bind(p + "mlp_norm.bias", {h}, true, &l.mlp_norm_bias));
    if (c.activation == Activation::kSwiGlu) {
      RETURN_IF_ERROR(b.Bind(p + "gate_up.weight", {2 * inter, h}, true, &l.gate_up));
      // NOTE: Llama's mlp_bias also puts biases on gate_proj and up_proj.
      if (c.mlp_bias)
        RETURN_IF_ERROR(b.Bind(p + "gate_up.bias", {2 * inter}, true, &l.gate_up_bias));
    } else {
      RETURN_IF_ERROR(b.Bind(p + "fc.weight", {inter, h}, true, &l.fc));
      if (c.mlp_bias) RETURN_IF_ERROR(b.Bind(p + "fc.bias", {inter}, true, &l.fc_bias));
    }
    RETURN_IF_ERROR(b.Bind(p + "down.weight", {h, inter}, true, &l.down));
    if (c.mlp_bias) RETURN_IF_ERROR(b.Bind(p + "down.bias", {h}, true, &l.down_bias));
    w.layers.push_back(l);
  }
  RETURN_IF_ERROR(b.Bind("final_norm.weight", {h}, true, &w.final_norm));
  if (c.norm_bias) RETURN_IF_ERROR(b.Bind("final_norm.bias", {h}, true, &w.final_norm_bias));
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed;
  } else {
    RETURN_IF_ERROR(b.Bind("lm_head.weight", {v, h}, true, &w.lm_head));
  }
  w.num_bytes = b.num_bytes();
  return w;
}

}  // namespace inflight::model
