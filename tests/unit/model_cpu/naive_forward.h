// A from-scratch forward pass for the Llama family (RMSNorm, RoPE, GQA, SwiGLU, optional biases,
// Qwen3's per-head q/k RMSNorm, per-layer sliding windows with sinks), in double, with plain loops
// over the whole sequence and no KV cache, paging or kernels: the independent check of what the
// runners compute. Slow on purpose; tiny models only.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "inflight/types.h"
#include "kernels/cpu/paged_kv.h"
#include "model/engine_config.h"
#include "model/rope_frequencies.h"
#include "model/transformer_weights.h"

namespace inflight::model::testing {

class NaiveForward {
 public:
  // windows: one per layer (empty: full attention everywhere).
  NaiveForward(const EngineConfig& config, const TransformerWeights& weights,
               std::vector<kernels::cpu::AttentionWindow> windows = {})
      : c_(config),
        w_(weights),
        windows_(std::move(windows)),
        inv_freq_(RopeInvFrequencies(config)) {
    windows_.resize(static_cast<std::size_t>(c_.num_layers));
  }

  // Logits [vocab] of the last position of `tokens`.
  std::vector<double> LastLogits(const VecTokens& tokens) const {
    const std::int64_t T = static_cast<std::int64_t>(tokens.size()), H = c_.hidden_size;
    const std::int64_t hd = c_.head_dim, nq = c_.num_attention_heads, nkv = c_.num_kv_heads;
    const std::int64_t inter = c_.intermediate_size;
    std::vector<std::vector<double>> x(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) x[t] = Row(w_.embed, tokens[t], H);
    for (std::int64_t layer = 0; layer < c_.num_layers; ++layer) {
      const LayerWeights& l = w_.layers[static_cast<std::size_t>(layer)];
      const kernels::cpu::AttentionWindow window = windows_[static_cast<std::size_t>(layer)];
      std::vector<std::vector<double>> q(T), k(T), v(T);
      for (std::int64_t t = 0; t < T; ++t) {
        const std::vector<double> h = RmsNorm(x[t], l.attn_norm);
        const std::vector<double> qkv = MatVec(l.qkv, l.qkv_bias, h, c_.QkvRows(1));
        q[t].assign(qkv.begin(), qkv.begin() + nq * hd);
        k[t].assign(qkv.begin() + nq * hd, qkv.begin() + (nq + nkv) * hd);
        v[t].assign(qkv.begin() + (nq + nkv) * hd, qkv.end());
        if (c_.qk_norm) {
          HeadNorm(q[t], nq, l.q_norm);
          HeadNorm(k[t], nkv, l.k_norm);
        }
        Rotate(q[t], nq, t);
        Rotate(k[t], nkv, t);
      }
      const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
      for (std::int64_t t = 0; t < T; ++t) {
        std::vector<double> attn(static_cast<std::size_t>(nq * hd), 0.0);
        for (std::int64_t h = 0; h < nq; ++h) {
          const std::int64_t kvh = h / (nq / nkv);
          std::vector<double> score(static_cast<std::size_t>(t + 1), -INFINITY);
          double max_s = -INFINITY;
          for (std::int64_t j = 0; j <= t; ++j) {
            if (!window.Visible(t, j)) continue;
            double s = 0;
            for (std::int64_t d = 0; d < hd; ++d) s += q[t][h * hd + d] * k[j][kvh * hd + d];
            score[j] = s * scale;
            max_s = std::max(max_s, score[j]);
          }
          double sum = 0;
          for (std::int64_t j = 0; j <= t; ++j) sum += (score[j] = std::exp(score[j] - max_s));
          for (std::int64_t j = 0; j <= t; ++j)
            for (std::int64_t d = 0; d < hd; ++d)
              attn[h * hd + d] += score[j] / sum * v[j][kvh * hd + d];
        }
        const std::vector<double> o = MatVec(l.attn_out, l.attn_out_bias, attn, H);
        for (std::int64_t i = 0; i < H; ++i) x[t][i] += o[i];
        const std::vector<double> h = RmsNorm(x[t], l.mlp_norm);
        const std::vector<double> gu = MatVec(l.gate_up, l.gate_up_bias, h, 2 * inter);
        std::vector<double> act(static_cast<std::size_t>(inter));
        for (std::int64_t i = 0; i < inter; ++i) {
          const double g = gu[i];
          act[i] = g / (1.0 + std::exp(-g)) * gu[inter + i];
        }
        const std::vector<double> down = MatVec(l.down, l.down_bias, act, H);
        for (std::int64_t i = 0; i < H; ++i) x[t][i] += down[i];
      }
    }
    return MatVec(w_.lm_head, WeightPtr(), RmsNorm(x[T - 1], w_.final_norm), c_.vocab_size);
  }

  // Greedy continuation of `prompt` by `n` tokens, every step from scratch.
  VecTokens Greedy(VecTokens prompt, int n) const {
    VecTokens out;
    for (int i = 0; i < n; ++i) {
      const std::vector<double> logits = LastLogits(prompt);
      const auto best =
          static_cast<TokenIdType>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      prompt.push_back(best);
      out.push_back(best);
    }
    return out;
  }

 private:
  static std::vector<double> Row(WeightPtr m, std::int64_t row, std::int64_t n) {
    std::vector<double> r(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) r[i] = m.Load(row * n + i);
    return r;
  }
  static std::vector<double> MatVec(WeightPtr m, WeightPtr bias, const std::vector<double>& x,
                                    std::int64_t rows) {
    const auto n = static_cast<std::int64_t>(x.size());
    std::vector<double> y(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
      double s = bias ? bias.Load(r) : 0.0;
      for (std::int64_t i = 0; i < n; ++i) s += m.Load(r * n + i) * x[i];
      y[r] = s;
    }
    return y;
  }
  std::vector<double> RmsNorm(const std::vector<double>& x, WeightPtr w) const {
    double ss = 0;
    for (double e : x) ss += e * e;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + c_.norm_eps);
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      y[i] = x[i] * inv * w.Load(static_cast<std::int64_t>(i));
    return y;
  }
  void HeadNorm(std::vector<double>& x, std::int64_t heads, WeightPtr w) const {
    const std::int64_t hd = c_.head_dim;
    for (std::int64_t h = 0; h < heads; ++h) {
      double ss = 0;
      for (std::int64_t d = 0; d < hd; ++d) ss += x[h * hd + d] * x[h * hd + d];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(hd) + c_.norm_eps);
      for (std::int64_t d = 0; d < hd; ++d) x[h * hd + d] *= inv * w.Load(d);
    }
  }
  // GPT-NeoX rotate-half at position `pos` (angle in fp32 as Hugging Face computes it).
  void Rotate(std::vector<double>& x, std::int64_t heads, std::int64_t pos) const {
    const std::int64_t half = c_.head_dim / 2;
    for (std::int64_t h = 0; h < heads; ++h) {
      double* v = x.data() + h * c_.head_dim;
      for (std::int64_t i = 0; i < half; ++i) {
        const double a = static_cast<float>(pos) * inv_freq_[static_cast<std::size_t>(i)];
        const double x0 = v[i], x1 = v[i + half];
        v[i] = x0 * std::cos(a) - x1 * std::sin(a);
        v[i + half] = x1 * std::cos(a) + x0 * std::sin(a);
      }
    }
  }

  const EngineConfig& c_;
  const TransformerWeights& w_;
  std::vector<kernels::cpu::AttentionWindow> windows_;
  std::vector<float> inv_freq_;
};

}  // namespace inflight::model::testing
