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

 private:
  const SafetensorsFile& file_;
  std::int64_t num_bytes_ = 0;
};

}  // namespace

Result<TransformerWeights> BindTransformerWeights(const EngineConfig& c, const ModelShard& shard,
                                                  const SafetensorsFile& file) {
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
    RETURN_IF_ERROR(b.Bind(p + "qkv.weight", {qkv_rows, h}, true, &l.qkv));
    if (c.qkv_bias) RETURN_IF_ERROR(b.Bind(p + "qkv.bias", {qkv_rows}, true, &l.qkv_bias));
    if (c.qk_norm) {
      RETURN_IF_ERROR(b.Bind(p + "q_norm.weight", {c.head_dim}, true, &l.q_norm));
      RETURN_IF_ERROR(b.Bind(p + "k_norm.weight", {c.head_dim}, true, &l.k_norm));
    }
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
  w.num_bytes = b.num_bytes();
  return w;
}

}  // namespace inflight::model
