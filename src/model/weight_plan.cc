#include "model/weight_plan.h"

#include <cstdlib>

#include "model/model_shard.h"

namespace inflight::model {
namespace {

using Shape = std::vector<std::int64_t>;

// Rows [r0, r1) of a tensor whose [rows, cols] view has `cols` columns.
WeightPiece RowSlice(std::string name, Shape shape, bool transpose, std::int64_t r0,
                     std::int64_t r1) {
  WeightPiece p;
  p.hf_name = std::move(name);
  p.transpose = transpose;
  const std::int64_t cols = shape.size() == 1 ? 1 : (transpose ? shape[0] : shape[1]);
  p.hf_shape = std::move(shape);
  p.row_begin = r0;
  p.row_end = r1;
  p.col_begin = 0;
  p.col_end = cols;
  return p;
}

WeightPiece Whole(std::string name, Shape shape, bool transpose = false) {
  const std::int64_t rows = shape.size() == 1 ? shape[0] : (transpose ? shape[1] : shape[0]);
  return RowSlice(std::move(name), std::move(shape), transpose, 0, rows);
}

// Columns [c0, c1) of a 2-D tensor, all rows.
WeightPiece ColSlice(std::string name, Shape shape, bool transpose, std::int64_t c0,
                     std::int64_t c1) {
  WeightPiece p = Whole(std::move(name), std::move(shape), transpose);
  p.col_begin = c0;
  p.col_end = c1;
  return p;
}

WeightPiece Zeros(std::int64_t rows) {
  WeightPiece p;
  p.zeros = true;
  p.row_end = rows;
  return p;
}

// HF checkpoint names of one architecture family.
struct HfNames {
  bool gpt2 = false;
  std::string Layer(std::int64_t i) const {
    return (gpt2 ? "h." : "model.layers.") + std::to_string(i) + ".";
  }
};

}  // namespace

std::vector<EngineWeight> PlanRankWeights(const EngineConfig& c, std::int32_t rank) {
  const std::int64_t t = c.tp_size, r = rank;
  const std::int64_t h = c.hidden_size, hd = c.head_dim, v = c.vocab_size;
  const std::int64_t nq = c.num_attention_heads, nkv = c.num_kv_heads, inter = c.intermediate_size;
  const std::int64_t q0 = r * nq / t, q1 = (r + 1) * nq / t;
  // NOTE: with fewer kv heads than ranks, rank r replicates kv head r * nkv / t (Validate ensures
  // t % nkv == 0), so each group of t / nkv ranks shares one kv head.
  const std::int64_t k0 = r * nkv / t, k1 = nkv >= t ? (r + 1) * nkv / t : k0 + 1;
  const std::int64_t i0 = r * inter / t, i1 = (r + 1) * inter / t;
  const std::int64_t local_q = (q1 - q0) * hd, local_kv = (k1 - k0) * hd, local_i = i1 - i0;
  const bool gpt2 = c.architecture == Architecture::kGpt2;
  const HfNames hf{gpt2};

  std::vector<EngineWeight> out;
  auto add = [&](std::string name, Shape shape, std::vector<WeightPiece> pieces) {
    EngineWeight w;
    w.name = std::move(name);
    w.shape = std::move(shape);
    w.pieces = std::move(pieces);
    out.push_back(std::move(w));
  };
  // A norm (weight, and bias for layernorm) replicated on every rank.
  auto add_norm = [&](const std::string& engine, const std::string& hf_prefix) {
    add(engine + ".weight", {h}, {Whole(hf_prefix + ".weight", {h})});
    if (c.norm_bias) add(engine + ".bias", {h}, {Whole(hf_prefix + ".bias", {h})});
  };
  // A bias that belongs after a column-split linear: summed once, so rank 0 holds it and the others
  // zeros.
  auto col_split_bias = [&](const std::string& hf_name) {
    return r == 0 ? Whole(hf_name, {h}) : Zeros(h);
  };

  add("embed.weight", {v, h}, {Whole(gpt2 ? "wte.weight" : "model.embed_tokens.weight", {v, h})});
  if (c.position_embedding == PositionEmbedding::kLearned) {
    const std::int64_t p = c.max_position_embeddings;
    add("pos_embed.weight", {p, h}, {Whole("wpe.weight", {p, h})});
  }
  const std::int64_t qkv_rows = local_q + 2 * local_kv;
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const std::string L = "layers." + std::to_string(i) + ".";
    const std::string H = hf.Layer(i);
    add_norm(L + "attn_norm", H + (gpt2 ? "ln_1" : "input_layernorm"));
    if (gpt2) {
      // c_attn is Conv1D [h, 3 * nq * hd]: transposed, its rows are q, then k, then v.
      const Shape w{h, (nq + 2 * nkv) * hd}, b{(nq + 2 * nkv) * hd};
      const std::int64_t kb = nq * hd, vb = (nq + nkv) * hd;
      const std::string n = H + "attn.c_attn.";
      add(L + "qkv.weight", {qkv_rows, h},
          {RowSlice(n + "weight", w, true, q0 * hd, q1 * hd),
           RowSlice(n + "weight", w, true, kb + k0 * hd, kb + k1 * hd),
           RowSlice(n + "weight", w, true, vb + k0 * hd, vb + k1 * hd)});
      add(L + "qkv.bias", {qkv_rows},
          {RowSlice(n + "bias", b, false, q0 * hd, q1 * hd),
           RowSlice(n + "bias", b, false, kb + k0 * hd, kb + k1 * hd),
           RowSlice(n + "bias", b, false, vb + k0 * hd, vb + k1 * hd)});
      add(L + "attn_out.weight", {h, local_q},
          {ColSlice(H + "attn.c_proj.weight", {nq * hd, h}, true, q0 * hd, q1 * hd)});
      add(L + "attn_out.bias", {h}, {col_split_bias(H + "attn.c_proj.bias")});
    } else {
      const std::string n = H + "self_attn.";
      const Shape qw{nq * hd, h}, kw{nkv * hd, h};
      add(L + "qkv.weight", {qkv_rows, h},
          {RowSlice(n + "q_proj.weight", qw, false, q0 * hd, q1 * hd),
           RowSlice(n + "k_proj.weight", kw, false, k0 * hd, k1 * hd),
           RowSlice(n + "v_proj.weight", kw, false, k0 * hd, k1 * hd)});
      if (c.qkv_bias) {
        add(L + "qkv.bias", {qkv_rows},
            {RowSlice(n + "q_proj.bias", {nq * hd}, false, q0 * hd, q1 * hd),
             RowSlice(n + "k_proj.bias", {nkv * hd}, false, k0 * hd, k1 * hd),
             RowSlice(n + "v_proj.bias", {nkv * hd}, false, k0 * hd, k1 * hd)});
      }
      if (c.qk_norm) {
        // Qwen3: one [head_dim] RMSNorm weight for every q head and one for every k head.
        add(L + "q_norm.weight", {hd}, {Whole(n + "q_norm.weight", {hd})});
        add(L + "k_norm.weight", {hd}, {Whole(n + "k_norm.weight", {hd})});
      }
      add(L + "attn_out.weight", {h, local_q},
          {ColSlice(n + "o_proj.weight", {h, nq * hd}, false, q0 * hd, q1 * hd)});
      if (c.attn_out_bias) add(L + "attn_out.bias", {h}, {col_split_bias(n + "o_proj.bias")});
    }
    add_norm(L + "mlp_norm", H + (gpt2 ? "ln_2" : "post_attention_layernorm"));
    if (c.activation == Activation::kSwiGlu) {
      const std::string n = H + "mlp.";
      add(L + "gate_up.weight", {2 * local_i, h},
          {RowSlice(n + "gate_proj.weight", {inter, h}, false, i0, i1),
           RowSlice(n + "up_proj.weight", {inter, h}, false, i0, i1)});
      if (c.mlp_bias) {
        add(L + "gate_up.bias", {2 * local_i},
            {RowSlice(n + "gate_proj.bias", {inter}, false, i0, i1),
             RowSlice(n + "up_proj.bias", {inter}, false, i0, i1)});
      }
      add(L + "down.weight", {h, local_i},
          {ColSlice(n + "down_proj.weight", {h, inter}, false, i0, i1)});
      if (c.mlp_bias) add(L + "down.bias", {h}, {col_split_bias(n + "down_proj.bias")});
    } else {
      const std::string n = H + "mlp.";
      add(L + "fc.weight", {local_i, h}, {RowSlice(n + "c_fc.weight", {h, inter}, true, i0, i1)});
      if (c.mlp_bias)
        add(L + "fc.bias", {local_i}, {RowSlice(n + "c_fc.bias", {inter}, false, i0, i1)});
      add(L + "down.weight", {h, local_i},
          {ColSlice(n + "c_proj.weight", {inter, h}, true, i0, i1)});
      if (c.mlp_bias) add(L + "down.bias", {h}, {col_split_bias(n + "c_proj.bias")});
    }
  }
  add_norm("final_norm", gpt2 ? "ln_f" : "model.norm");
  if (!c.tie_word_embeddings) add("lm_head.weight", {v, h}, {Whole("lm_head.weight", {v, h})});
  return out;
}

std::vector<EngineWeight> PlanFileWeights(const EngineConfig& c, std::int32_t file_rank) {
  const std::int32_t tp_rank = file_rank % c.tp_size, pp_rank = file_rank / c.tp_size;
  std::vector<EngineWeight> all = PlanRankWeights(c, tp_rank);
  if (c.pp_size == 1) return all;
  const Result<ModelShard> shard = MakeModelShard(c, tp_rank, c.tp_size, pp_rank, c.pp_size);
  // NOTE: Validate() accepted c, whose sizes are the shard's; the ranks are in range by the
  // callers' loops over [0, tp_size * pp_size).
  if (!shard.ok()) std::abort();
  const bool embed = shard->first_stage() || (shard->last_stage() && c.tie_word_embeddings);
  std::vector<EngineWeight> out;
  for (EngineWeight& w : all) {
    const std::string& n = w.name;
    bool keep = false;
    if (n.rfind("layers.", 0) == 0) {
      const std::int64_t layer = std::strtoll(n.c_str() + 7, nullptr, 10);
      keep = layer >= shard->first_layer && layer < shard->last_layer;
    } else if (n == "embed.weight") {
      keep = embed;
    } else if (n == "pos_embed.weight") {
      keep = shard->first_stage();
    } else {  // final_norm.*, lm_head.weight
      keep = shard->last_stage();
    }
    if (keep) out.push_back(std::move(w));
  }
  return out;
}

}  // namespace inflight::model
