#include "model/quant_plan.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "model/safetensors.h"

namespace inflight::model {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "layers.3.qkv.weight" → "layers.3.qkv"
std::string LinearName(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string(".weight").size());
}

// The input columns of the whole (unsplit) linear: a column-split piece's checkpoint width.
std::int64_t FullInFeatures(const EngineWeight& w) {
  const WeightPiece& p = w.pieces.front();
  return p.hf_shape.size() == 2 ? p.hf_shape[1] : w.linear_cols;
}

std::int64_t ScaleGroups(const QuantConfig& q, const EngineWeight& linear) {
  if (q.weight_granularity != WeightScaleGranularity::kPerGroup) return 1;
  // NOTE: with act-order (g_idx) a rank's columns may fall in any group: every group is kept.
  const std::int64_t in = q.has_group_index ? FullInFeatures(linear) : linear.linear_cols;
  return (in + q.group_size - 1) / q.group_size;
}

std::vector<QuantPart> PartsOf(const QuantConfig& q) {
  std::vector<QuantPart> parts{QuantPart::kWeight, QuantPart::kWeightScale};
  if (q.has_zero_point) parts.push_back(QuantPart::kWeightZero);
  if (q.has_group_index) parts.push_back(QuantPart::kGroupIndex);
  if (q.activation_scaling == ActivationScaling::kStatic) parts.push_back(QuantPart::kInputScale);
  return parts;
}

}  // namespace

std::int64_t LayerOf(const std::string& name) {
  const std::size_t a = name.find('.') + 1, b = name.find('.', a);
  return std::stoll(name.substr(a, b - a));
}

bool IsQuantizedLinear(std::string_view name) {
  if (name.substr(0, 7) != "layers.") return false;
  for (std::string_view s :
       {".qkv.weight", ".attn_out.weight", ".gate_up.weight", ".fc.weight", ".down.weight"}) {
    if (EndsWith(name, s)) return true;
  }
  return false;
}

std::vector<EngineWeight> QuantizeRankPlan(const EngineConfig& c, std::vector<EngineWeight> plan) {
  const QuantConfig& q = c.quant;
  if (!q.any()) return plan;
  std::vector<EngineWeight> out;
  auto add_kv_scale = [&](std::int64_t layer) {
    EngineWeight s;
    s.name = "layers." + std::to_string(layer) + ".kv_cache_scale";
    s.shape = {2};
    s.kv_cache_scale = true;
    s.stored_dtype = DType::kFloat32;
    out.push_back(std::move(s));
  };
  // A stage file's KV cache scales are its layers' only: [first, last] of the plan's layer tensors
  // (every stage holds at least one layer).
  std::int64_t first_layer = c.num_layers, last_layer = -1;
  for (const EngineWeight& w : plan) {
    if (w.name.rfind("layers.", 0) != 0) continue;
    first_layer = std::min(first_layer, LayerOf(w.name));
    last_layer = std::max(last_layer, LayerOf(w.name));
  }
  std::int64_t kv_scales_added = first_layer;
  for (EngineWeight& w : plan) {
    // The layer's scale goes after its last tensor (before the next layer's first).
    if (q.kv_cache_fp8 && w.name.rfind("layers.", 0) == 0) {
      const std::int64_t layer = LayerOf(w.name);
      while (kv_scales_added < layer) add_kv_scale(kv_scales_added++);
    }
    if (!q.quantized_weights() || !IsQuantizedLinear(w.name)) {
      out.push_back(std::move(w));
      continue;
    }
    const std::string linear = LinearName(w.name);
    w.linear_rows = w.shape[0];
    w.linear_cols = w.shape[1];
    const std::int64_t groups = ScaleGroups(q, w);
    for (QuantPart part : PartsOf(q)) {
      EngineWeight p = w;
      p.name = linear + "." + QuantPartSuffix(part);
      p.shape = QuantPartShape(q, part, w.linear_rows, w.linear_cols, groups);
      p.quant_part = part;
      p.stored_dtype = QuantPartDType(q, part);
      out.push_back(std::move(p));
    }
  }
  if (q.kv_cache_fp8) {
    while (kv_scales_added <= last_layer) add_kv_scale(kv_scales_added++);
  }
  return out;
}

Status CheckQuantizedLayout(const EngineConfig& c) {
  const QuantConfig& q = c.quant;
  if (!q.quantized_weights()) return Status::Ok();
  for (std::int32_t rank = 0; rank < c.tp_size; ++rank) {
    for (const EngineWeight& w : PlanRankWeights(c, rank)) {
      if (!IsQuantizedLinear(w.name)) continue;
      const std::int64_t cols = w.shape[1];
      const std::string where = "rank " + std::to_string(rank) + " tensor \"" + w.name + "\"";
      if (q.quant_algo == QuantAlgo::kInt4Wo && cols % 2 != 0) {
        return Unsupported(where + " has " + std::to_string(cols) +
                           " input columns; int4_wo packs two a byte and needs an even number");
      }
      if (q.weight_granularity != WeightScaleGranularity::kPerGroup || q.has_group_index) continue;
      for (const WeightPiece& p : w.pieces) {
        const std::int64_t full = p.hf_shape[1];
        const std::int64_t g = q.group_size;
        if (p.col_begin % g != 0 || (p.col_end != full && (p.col_end - p.col_begin) % g != 0)) {
          return Unsupported(where + ": tp_size " + std::to_string(c.tp_size) +
                             " gives it input columns [" + std::to_string(p.col_begin) + ", " +
                             std::to_string(p.col_end) + ") of " + p.hf_name +
                             ", which cut its scale groups of group_size " + std::to_string(g) +
                             "; accepted: a tp_size whose slices are multiples of group_size");
        }
      }
    }
  }
  return Status::Ok();
}

Status FillQuantizedWeight(const EngineConfig& c, const QuantizedLinearSource& source,
                           const EngineWeight& w, std::byte* dst) {
  if (w.kv_cache_scale) {
    const std::int64_t layer = LayerOf(w.name);
    ASSIGN_OR_RETURN(auto scales, source.KvCacheScales(layer));
    std::memcpy(dst, scales.data(), sizeof(float) * 2);
    return Status::Ok();
  }
  std::vector<std::shared_ptr<const QuantizedMatrix>> pieces;
  for (const WeightPiece& p : w.pieces) {
    if (p.zeros || p.transpose || p.hf_shape.size() != 2) {
      return Internal("quantized linear " + w.name +
                      " has a piece that is not a row or column "
                      "block of a [out, in] checkpoint weight");
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const QuantizedMatrix> m, source.Load(p.hf_name, p.hf_shape));
    if (m->rows != p.hf_shape[0] || m->cols != p.hf_shape[1]) {
      return Internal(p.hf_name + ": quantized source gave [" + std::to_string(m->rows) + ", " +
                      std::to_string(m->cols) + "], expected " + ShapeToString(p.hf_shape));
    }
    // A whole matrix (every piece of a tp_size 1 engine) is not sliced: it is written from the
    // source's copy, and an 8B model's linears are gigabytes.
    if (p.row_begin != 0 || p.row_end != m->rows) {
      m = std::make_shared<const QuantizedMatrix>(SliceRows(*m, p.row_begin, p.row_end));
    }
    if (p.col_begin != 0 || p.col_end != m->cols) {
      ASSIGN_OR_RETURN(QuantizedMatrix cols, SliceCols(*m, p.col_begin, p.col_end, p.hf_name));
      m = std::make_shared<const QuantizedMatrix>(std::move(cols));
    }
    pieces.push_back(std::move(m));
  }
  if (pieces.size() == 1) return WriteQuantPart(c.quant, *w.quant_part, *pieces.front(), dst);
  std::vector<const QuantizedMatrix*> stack;
  stack.reserve(pieces.size());
  for (const auto& piece : pieces) stack.push_back(piece.get());
  return WriteStackedQuantPart(c.quant, *w.quant_part, stack, w.name, dst);
}

}  // namespace inflight::model
