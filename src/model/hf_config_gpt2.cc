// GPT2LMHeadModel config.json → EngineConfig. Defaults from GPT2Config (configuration_gpt2.py);
// what the model reads from modeling_gpt2.py (GPT2Attention, GPT2MLP, GPT2Block).
#include "model/hf_config_readers.h"

namespace inflight::model {

Status ReadGpt2Config(const JsonFields& f, EngineConfig* c) {
  RETURN_IF_ERROR(f.Int("n_embd", &c->hidden_size));
  RETURN_IF_ERROR(f.Int("n_layer", &c->num_layers));
  RETURN_IF_ERROR(f.Int("n_head", &c->num_attention_heads));
  if (c->num_attention_heads <= 0 || c->hidden_size % c->num_attention_heads != 0) {
    return InvalidArgument(f.where() + ": n_embd " + std::to_string(c->hidden_size) +
                           " is not a multiple of n_head " +
                           std::to_string(c->num_attention_heads));
  }
  c->num_kv_heads = c->num_attention_heads;
  c->head_dim = c->hidden_size / c->num_attention_heads;
  RETURN_IF_ERROR(f.Int("n_positions", &c->max_position_embeddings));
  c->intermediate_size = 4 * c->hidden_size;  // GPT2MLP: n_inner if not None else 4 * n_embd
  RETURN_IF_ERROR(f.Int("n_inner", &c->intermediate_size, false));
  c->norm_eps = 1e-5f;
  RETURN_IF_ERROR(f.Float("layer_norm_epsilon", &c->norm_eps, false));
  std::string act = "gelu_new";
  RETURN_IF_ERROR(f.String("activation_function", &act, false));
  // ACT2FN: gelu_new (NewGELUActivation), gelu_pytorch_tanh and gelu_fast are one tanh
  // approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), written three ways.
  if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu_fast") {
    return Unsupported(f.where() + ": \"activation_function\" \"" + act +
                       "\" is not supported; supported: gelu_new, gelu_pytorch_tanh, gelu_fast");
  }
  // GPT2Attention: scores / sqrt(head_dim) only when scale_attn_weights; a further / (layer + 1)
  // with scale_attn_by_inverse_layer_idx.
  bool scale_weights = true, scale_by_layer = false;
  RETURN_IF_ERROR(f.Bool("scale_attn_weights", &scale_weights, false));
  if (!scale_weights) {
    return Unsupported(f.where() +
                       ": \"scale_attn_weights\" false is not supported; supported: true "
                       "(attention scores divided by sqrt(head_dim))");
  }
  RETURN_IF_ERROR(f.Bool("scale_attn_by_inverse_layer_idx", &scale_by_layer, false));
  if (scale_by_layer) {
    return Unsupported(f.where() +
                       ": \"scale_attn_by_inverse_layer_idx\" true is not supported; supported: "
                       "false");
  }
  c->norm = NormKind::kLayerNorm;
  c->activation = Activation::kGeluNew;
  c->position_embedding = PositionEmbedding::kLearned;
  c->qkv_bias = c->attn_out_bias = c->mlp_bias = c->norm_bias = true;
  return Status::Ok();
}

}  // namespace inflight::model
