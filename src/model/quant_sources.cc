#include "model/quant_sources.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

namespace inflight::model {
namespace {

bool IsFloat(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

std::string Base(const std::string& weight_name) {  // "x.weight" → "x."
  return weight_name.substr(0, weight_name.size() - std::string("weight").size());
}

class TensorReader {
 public:
  explicit TensorReader(const CheckpointIndex& c) : c_(c) {}

  // The tensor `name` with `dtype` (or any float dtype when dtype is nullopt) and `shape` (any
  // shape when empty).
  Result<const TensorInfo*> Need(const std::string& name, std::optional<DType> dtype,
                                 const std::vector<std::int64_t>& shape) const {
    const TensorInfo* t = c_.Find(name);
    if (t == nullptr) {
      return NotFound("checkpoint tensor \"" + name + "\" is missing; searched " + c_.Describe());
    }
    if (dtype ? t->dtype != *dtype : !IsFloat(t->dtype)) {
      return InvalidArgument("checkpoint tensor \"" + name + "\" in " + c_.FileOf(t) +
                             " has dtype " + DTypeName(t->dtype) + ", expected " +
                             (dtype ? DTypeName(*dtype) : "float32, float16 or bfloat16"));
    }
    if (!shape.empty() && t->shape != shape) {
      return InvalidArgument("checkpoint tensor \"" + name + "\" in " + c_.FileOf(t) +
                             " has shape " + ShapeToString(t->shape) + ", expected " +
                             ShapeToString(shape));
    }
    return t;
  }
  Result<std::vector<float>> Floats(const std::string& name,
                                    const std::vector<std::int64_t>& shape) const {
    std::vector<float> v;
    RETURN_IF_ERROR(FloatsInto(name, shape, &v));
    return v;
  }
  Status FloatsInto(const std::string& name, const std::vector<std::int64_t>& shape,
                    std::vector<float>* out) const {
    ASSIGN_OR_RETURN(const TensorInfo* t, Need(name, std::nullopt, shape));
    out->resize(static_cast<std::size_t>(t->numel()));
    ConvertToFloat(t->dtype, t->data, out->data(), out->size());
    return Status::Ok();
  }
  // A float tensor of one element, of shape [], [1] or [1, 1] as the exporters write it.
  Result<float> Scalar(const std::string& name) const {
    ASSIGN_OR_RETURN(const TensorInfo* t, Need(name, std::nullopt, {}));
    if (t->numel() != 1) {
      return InvalidArgument("checkpoint tensor \"" + name + "\" has shape " +
                             ShapeToString(t->shape) + ", expected one element");
    }
    float f = 0;
    ConvertToFloat(t->dtype, t->data, &f, 1);
    return f;
  }
  Result<std::vector<std::int32_t>> Ints(const std::string& name,
                                         const std::vector<std::int64_t>& shape) const {
    ASSIGN_OR_RETURN(const TensorInfo* t, Need(name, DType::kInt32, shape));
    std::vector<std::int32_t> v(static_cast<std::size_t>(t->numel()));
    std::memcpy(v.data(), t->data, v.size() * 4);
    return v;
  }
  const CheckpointIndex& checkpoint() const { return c_; }

 private:
  const CheckpointIndex& c_;
};

class BuildTimeQuantizer final : public QuantizedLinearSource {
 public:
  BuildTimeQuantizer(FloatWeightSource w, const QuantConfig& q,
                     std::shared_ptr<const StaticFp8Scales> static_fp8)
      : w_(std::move(w)), q_(q), static_fp8_(std::move(static_fp8)) {}
  Status Check(const std::string& name, const std::vector<std::int64_t>& shape) const override {
    return w_.check(name, shape);
  }
  Result<std::shared_ptr<const QuantizedMatrix>> Load(
      const std::string& name, const std::vector<std::int64_t>& shape) const override {
    // Every part of a linear (codes, scales) and every fused piece's part asks for its checkpoint
    // tensor, from several writer workers at about the same time: one quantization answers them
    // all (it was 2-3x an FP8 build's work).
    std::promise<Result<std::shared_ptr<const QuantizedMatrix>>> promise;
    SharedLoad result;
    bool mine = false;
    {
      std::lock_guard<std::mutex> lock(recent_mu_);
      auto it = std::find_if(recent_.begin(), recent_.end(),
                             [&](const auto& entry) { return entry.first == name; });
      if (it != recent_.end()) {
        result = it->second;
      } else {
        mine = true;
        result = promise.get_future().share();
        recent_.emplace_back(name, result);
        if (recent_.size() > kRecentLoads) recent_.pop_front();
      }
    }
    if (mine) {
      std::vector<float> w = TakeBuffer();
      Result<QuantizedMatrix> m = Quantize(name, shape, &w);
      GiveBuffer(std::move(w));
      if (m.ok()) {
        promise.set_value(std::make_shared<const QuantizedMatrix>(std::move(*m)));
      } else {
        promise.set_value(m.status());
      }
    }
    return result.get();
  }
  Result<std::array<float, 2>> KvCacheScales(std::int64_t layer) const override {
    if (static_fp8_ != nullptr && !static_fp8_->kv_scales.empty()) {
      return static_fp8_->kv_scales.at(static_cast<std::size_t>(layer));
    }
    // NOTE: no calibration: K and V are stored as they are (scale 1), saturating past +-448.
    return std::array<float, 2>{1.0f, 1.0f};
  }

 private:
  Result<QuantizedMatrix> Quantize(const std::string& name, const std::vector<std::int64_t>& shape,
                                   std::vector<float>* w) const {
    RETURN_IF_ERROR(w_.read(name, shape, w));
    const std::int64_t group =
        q_.weight_granularity == WeightScaleGranularity::kPerGroup ? q_.group_size : 0;
    switch (q_.quant_algo) {
      case QuantAlgo::kFp8:
        if (static_fp8_ != nullptr) return QuantizeFp8Static(name, shape, w);
        return QuantizeFp8PerChannel(w->data(), shape[0], shape[1]);
      case QuantAlgo::kInt8Wo:
        return QuantizeInt8Symmetric(w->data(), shape[0], shape[1], group);
      case QuantAlgo::kInt4Wo:
        return QuantizeInt4Symmetric(w->data(), shape[0], shape[1], group);
      case QuantAlgo::kNone:
        break;
    }
    return Internal("build-time quantizer without a quant_algo");
  }

  // One scale for the weights of one GEMM (the largest |w| of them all), the calibrated input
  // scale. `w` holds `name`'s weights.
  Result<QuantizedMatrix> QuantizeFp8Static(const std::string& name,
                                            const std::vector<std::int64_t>& shape,
                                            std::vector<float>* w) const {
    const auto group = static_fp8_->weight_groups.find(name);
    const auto input = static_fp8_->input_scales.find(name);
    if (group == static_fp8_->weight_groups.end() || input == static_fp8_->input_scales.end()) {
      return Internal("static FP8 scales: no scales planned for " + name);
    }
    float amax = 0.0f;
    for (const StaticFp8Scales::Weight& member : group->second) {
      ASSIGN_OR_RETURN(float a,
                       member.name == name ? RememberAmax(name, AmaxOf(*w)) : WeightAmax(member));
      amax = std::max(amax, a);
    }
    QuantizedMatrix m = QuantizeFp8WithScale(w->data(), shape[0], shape[1], Fp8ScaleOfAmax(amax));
    m.input_scale = input->second;
    return m;
  }
  static float AmaxOf(const std::vector<float>& w) {
    float a = 0.0f;
    for (float x : w) a = std::max(a, std::fabs(x));
    return a;
  }
  // A fused sibling's largest |w|, read once per build (q's, k's and v's loads each ask for the
  // others'; a weight's own load remembers it too).
  Result<float> WeightAmax(const StaticFp8Scales::Weight& weight) const {
    {
      std::lock_guard<std::mutex> lock(amax_mu_);
      const auto it = weight_amax_.find(weight.name);
      if (it != weight_amax_.end()) return it->second;
    }
    std::vector<float> w = TakeBuffer();
    const Status st = w_.read(weight.name, weight.shape, &w);
    const float a = st.ok() ? AmaxOf(w) : 0.0f;
    GiveBuffer(std::move(w));
    RETURN_IF_ERROR(st);
    return RememberAmax(weight.name, a);
  }
  Result<float> RememberAmax(const std::string& name, float amax) const {
    std::lock_guard<std::mutex> lock(amax_mu_);
    weight_amax_[name] = amax;
    return amax;
  }

  // Float buffers reused between loads (one per load in flight): a fresh one per linear is
  // first-touch page faults over gigabytes for an 8B model, measured at ~40% of an fp8 build.
  std::vector<float> TakeBuffer() const {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pool_.empty()) return {};
    std::vector<float> v = std::move(pool_.back());
    pool_.pop_back();
    return v;
  }
  void GiveBuffer(std::vector<float> v) const {
    std::lock_guard<std::mutex> lock(pool_mu_);
    pool_.push_back(std::move(v));
  }

  // The last loads, finished or in flight: a linear's parts are neighbours in a rank's plan, so a
  // few suffice (at most 16 matrices: 3.8 GB of codes at a 70B gate/up's size).
  static constexpr std::size_t kRecentLoads = 16;

  FloatWeightSource w_;
  QuantConfig q_;
  std::shared_ptr<const StaticFp8Scales> static_fp8_;  // null: per-channel, dynamic FP8
  mutable std::mutex amax_mu_;
  mutable std::map<std::string, float> weight_amax_;
  mutable std::mutex pool_mu_;
  mutable std::vector<std::vector<float>> pool_;
  mutable std::mutex recent_mu_;
  using SharedLoad = std::shared_future<Result<std::shared_ptr<const QuantizedMatrix>>>;
  mutable std::deque<std::pair<std::string, SharedLoad>> recent_;
};

class PrequantizedSource final : public QuantizedLinearSource {
 public:
  PrequantizedSource(const CheckpointIndex& c, const CheckpointQuantization& f) : r_(c), f_(f) {}

  Status Check(const std::string& name, const std::vector<std::int64_t>& shape) const override {
    return Unpack(name, shape).status();  // unpacking one linear is cheap next to writing it
  }
  Result<std::shared_ptr<const QuantizedMatrix>> Load(
      const std::string& name, const std::vector<std::int64_t>& shape) const override {
    ASSIGN_OR_RETURN(QuantizedMatrix m, Unpack(name, shape));
    return std::make_shared<const QuantizedMatrix>(std::move(m));
  }
  Result<std::array<float, 2>> KvCacheScales(std::int64_t layer) const override {
    if (!f_.kv_scales_in_checkpoint) return std::array<float, 2>{1.0f, 1.0f};
    const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
    // compressed-tensors: self_attn.k_scale; ModelOpt: self_attn.k_proj.k_scale (the names vLLM's
    // maybe_remap_kv_scale_name reads for each).
    const bool modelopt = f_.format == CheckpointQuantFormat::kModelOpt;
    ASSIGN_OR_RETURN(float k, r_.Scalar(p + (modelopt ? "k_proj.k_scale" : "k_scale")));
    ASSIGN_OR_RETURN(float v, r_.Scalar(p + (modelopt ? "v_proj.v_scale" : "v_scale")));
    return std::array<float, 2>{k, v};
  }

 private:
  // One linear's checkpoint tensors as a matrix, as its format stores them.
  Result<QuantizedMatrix> Unpack(const std::string& name,
                                 const std::vector<std::int64_t>& shape) const {
    switch (f_.format) {
      case CheckpointQuantFormat::kCompressedTensors:
      case CheckpointQuantFormat::kModelOpt:
        return LoadFp8(name, shape);
      case CheckpointQuantFormat::kAwq:
        return LoadAwq(name, shape);
      case CheckpointQuantFormat::kGptq:
        return LoadGptq(name, shape);
      case CheckpointQuantFormat::kNone:
        break;
    }
    return Internal("pre-quantized source without a format");
  }

  Result<QuantizedMatrix> LoadFp8(const std::string& name,
                                  const std::vector<std::int64_t>& shape) const {
    const std::int64_t rows = shape[0], cols = shape[1];
    ASSIGN_OR_RETURN(const TensorInfo* w, r_.Need(name, DType::kFloat8E4M3, shape));
    const std::string base = Base(name);
    ASSIGN_OR_RETURN(const TensorInfo* s, r_.Need(base + "weight_scale", std::nullopt, {}));
    QuantizedMatrix m;
    m.algo = QuantAlgo::kFp8;
    m.rows = rows;
    m.cols = cols;
    m.codes.assign(reinterpret_cast<const std::uint8_t*>(w->data),
                   reinterpret_cast<const std::uint8_t*>(w->data) + rows * cols);
    std::vector<float> scale(static_cast<std::size_t>(s->numel()));
    ConvertToFloat(s->dtype, s->data, scale.data(), scale.size());
    if (s->numel() == 1) {
      m.scales.assign(static_cast<std::size_t>(rows), scale[0]);  // per tensor, per row
    } else if (s->numel() == rows) {
      m.scales = std::move(scale);  // per channel: [out, 1] (compressed-tensors) or [out]
    } else {
      return InvalidArgument("checkpoint tensor \"" + base + "weight_scale\" has shape " +
                             ShapeToString(s->shape) + ", expected one element (per tensor) or " +
                             std::to_string(rows) + " (per channel)");
    }
    if (f_.engine.activation_scaling == ActivationScaling::kStatic) {
      ASSIGN_OR_RETURN(m.input_scale, r_.Scalar(base + "input_scale"));
    }
    return m;
  }

  Result<QuantizedMatrix> LoadAwq(const std::string& name,
                                  const std::vector<std::int64_t>& shape) const {
    const std::int64_t out = shape[0], in = shape[1], g = f_.engine.group_size;
    const std::string base = Base(name);
    if (out % 8 != 0 || in % g != 0) {
      return Unsupported(base + "qweight: a linear of " + std::to_string(in) + " inputs and " +
                         std::to_string(out) +
                         " outputs does not fit AWQ's packing (outputs a "
                         "multiple of 8, inputs of group_size " +
                         std::to_string(g) + ")");
    }
    ASSIGN_OR_RETURN(auto qweight, r_.Ints(base + "qweight", {in, out / 8}));
    ASSIGN_OR_RETURN(auto qzeros, r_.Ints(base + "qzeros", {in / g, out / 8}));
    ASSIGN_OR_RETURN(auto scales, r_.Floats(base + "scales", {in / g, out}));
    return UnpackAwqGemm(qweight.data(), qzeros.data(), scales.data(), in, out, g);
  }

  Result<QuantizedMatrix> LoadGptq(const std::string& name,
                                   const std::vector<std::int64_t>& shape) const {
    const std::int64_t out = shape[0], in = shape[1], bits = f_.bits;
    const std::int64_t per_word = 32 / bits, g = f_.engine.group_size;
    const std::int64_t groups = g > 0 ? (in + g - 1) / g : 1;
    const std::string base = Base(name);
    if (in % per_word != 0 || out % per_word != 0) {
      return Unsupported(base + "qweight: a linear of " + std::to_string(in) + " inputs and " +
                         std::to_string(out) + " outputs does not fit GPTQ's " +
                         std::to_string(bits) + "-bit packing (both multiples of " +
                         std::to_string(per_word) + ")");
    }
    ASSIGN_OR_RETURN(auto qweight, r_.Ints(base + "qweight", {in / per_word, out}));
    ASSIGN_OR_RETURN(auto qzeros, r_.Ints(base + "qzeros", {groups, out / per_word}));
    ASSIGN_OR_RETURN(auto scales, r_.Floats(base + "scales", {groups, out}));
    std::vector<std::int32_t> g_idx;
    if (r_.checkpoint().Find(base + "g_idx") != nullptr) {
      ASSIGN_OR_RETURN(g_idx, r_.Ints(base + "g_idx", {in}));
      for (std::int64_t i = 0; i < in; ++i) {
        const std::int32_t gi = g_idx[static_cast<std::size_t>(i)];
        if (gi < 0 || gi >= groups) {
          return InvalidArgument(base + "g_idx[" + std::to_string(i) + "] is " +
                                 std::to_string(gi) + ", outside [0, " + std::to_string(groups) +
                                 ")");
        }
        if (!f_.engine.has_group_index && gi != (g > 0 ? i / g : 0)) {
          return Unsupported(base + "g_idx[" + std::to_string(i) + "] is " + std::to_string(gi) +
                             " but desc_act is false (expected input / group_size); set desc_act "
                             "true in quantization_config if the checkpoint is act-order");
        }
      }
    } else if (f_.engine.has_group_index) {
      return NotFound("checkpoint tensor \"" + base + "g_idx\" is missing (desc_act is true)");
    }
    QuantizedMatrix m = UnpackGptq(qweight.data(), qzeros.data(), scales.data(),
                                   f_.engine.has_group_index ? g_idx.data() : nullptr, in, out,
                                   static_cast<int>(bits), g, f_.gptq_zeros_minus_one);
    if (bits == 8) {
      for (std::uint8_t z : m.zeros) {
        if (z == 0x80 && f_.gptq_zeros_minus_one) {
          // stored 255 + 1 = 256 wrapped: a zero point int8 cannot hold.
          return Unsupported(base +
                             "qzeros holds 255 (zero point 256 with checkpoint_format "
                             "gptq), outside the int8 range this engine stores");
        }
      }
    }
    return m;
  }

  TensorReader r_;
  CheckpointQuantization f_;
};

}  // namespace

std::unique_ptr<QuantizedLinearSource> MakeBuildTimeQuantizer(
    const CheckpointIndex& checkpoint, const QuantConfig& quant,
    std::shared_ptr<const StaticFp8Scales> static_fp8) {
  // The reader lives as long as the checkpoint, which outlives the source (as before).
  auto reader = std::make_shared<const TensorReader>(checkpoint);
  FloatWeightSource weights;
  weights.check = [reader](const std::string& name, const std::vector<std::int64_t>& shape) {
    return reader->Need(name, std::nullopt, shape).status();
  };
  weights.read = [reader](const std::string& name, const std::vector<std::int64_t>& shape,
                          std::vector<float>* out) { return reader->FloatsInto(name, shape, out); };
  return MakeBuildTimeQuantizer(std::move(weights), quant, std::move(static_fp8));
}

std::unique_ptr<QuantizedLinearSource> MakeBuildTimeQuantizer(
    FloatWeightSource weights, const QuantConfig& quant,
    std::shared_ptr<const StaticFp8Scales> static_fp8) {
  return std::make_unique<BuildTimeQuantizer>(std::move(weights), quant, std::move(static_fp8));
}

std::unique_ptr<QuantizedLinearSource> MakePrequantizedSource(
    const CheckpointIndex& checkpoint, const CheckpointQuantization& format) {
  return std::make_unique<PrequantizedSource>(checkpoint, format);
}

QuantizedMatrix UnpackAwqGemm(const std::int32_t* qweight, const std::int32_t* qzeros,
                              const float* scales, std::int64_t in, std::int64_t out,
                              std::int64_t group_size) {
  QuantizedMatrix m;
  m.algo = QuantAlgo::kInt4Wo;
  m.rows = out;
  m.cols = in;
  m.group_size = group_size < in ? group_size : 0;
  m.num_groups = (in + group_size - 1) / group_size;
  m.codes.resize(static_cast<std::size_t>(out * in));
  m.scales.resize(static_cast<std::size_t>(out * m.num_groups));
  m.zeros.resize(m.scales.size());
  const std::int64_t words = out / 8;
  // Word j of a row holds output columns 8j .. 8j + 7, nibble i being column 8j + kAwqOrder[i].
  auto nibble_of = [](std::uint32_t word, int i) { return (word >> (4 * i)) & 0xfu; };
  for (std::int64_t i = 0; i < in; ++i) {
    for (std::int64_t j = 0; j < words; ++j) {
      const auto word = static_cast<std::uint32_t>(qweight[i * words + j]);
      for (int n = 0; n < 8; ++n) {
        const std::int64_t o = 8 * j + kAwqOrder[n];
        m.codes[static_cast<std::size_t>(o * in + i)] =
            static_cast<std::uint8_t>(nibble_of(word, n));
      }
    }
  }
  for (std::int64_t gi = 0; gi < m.num_groups; ++gi) {
    for (std::int64_t j = 0; j < words; ++j) {
      const auto word = static_cast<std::uint32_t>(qzeros[gi * words + j]);
      for (int n = 0; n < 8; ++n) {
        const std::int64_t o = 8 * j + kAwqOrder[n];
        m.zeros[static_cast<std::size_t>(o * m.num_groups + gi)] =
            static_cast<std::uint8_t>(nibble_of(word, n));
      }
    }
    for (std::int64_t o = 0; o < out; ++o)
      m.scales[static_cast<std::size_t>(o * m.num_groups + gi)] = scales[gi * out + o];
  }
  return m;
}

QuantizedMatrix UnpackGptq(const std::int32_t* qweight, const std::int32_t* qzeros,
                           const float* scales, const std::int32_t* g_idx, std::int64_t in,
                           std::int64_t out, int bits, std::int64_t group_size,
                           bool zeros_minus_one) {
  QuantizedMatrix m;
  m.algo = bits == 4 ? QuantAlgo::kInt4Wo : QuantAlgo::kInt8Wo;
  m.rows = out;
  m.cols = in;
  m.num_groups = group_size > 0 ? (in + group_size - 1) / group_size : 1;
  m.group_size = group_size > 0 && m.num_groups > 1 ? group_size : 0;
  if (g_idx != nullptr) m.g_idx.assign(g_idx, g_idx + in);
  m.codes.resize(static_cast<std::size_t>(out * in));
  m.scales.resize(static_cast<std::size_t>(out * m.num_groups));
  m.zeros.resize(m.scales.size());
  const std::int64_t per_word = 32 / bits;
  const std::uint32_t mask = (1u << bits) - 1u;
  // int8 codes are kept as two's complement of (code - 128): q - z is unchanged.
  const std::uint32_t shift = bits == 8 ? 0x80u : 0u;
  for (std::int64_t r = 0; r < in / per_word; ++r) {
    for (std::int64_t o = 0; o < out; ++o) {
      const auto word = static_cast<std::uint32_t>(qweight[r * out + o]);
      for (std::int64_t j = 0; j < per_word; ++j) {
        const std::uint32_t v = (word >> (bits * j)) & mask;
        m.codes[static_cast<std::size_t>(o * in + r * per_word + j)] =
            static_cast<std::uint8_t>(v ^ shift);
      }
    }
  }
  const std::int64_t zero_words = out / per_word;
  for (std::int64_t gi = 0; gi < m.num_groups; ++gi) {
    for (std::int64_t c = 0; c < zero_words; ++c) {
      const auto word = static_cast<std::uint32_t>(qzeros[gi * zero_words + c]);
      for (std::int64_t j = 0; j < per_word; ++j) {
        // NOTE: v1 adds the 1 back without masking, as AutoGPTQ's dequantization does: a stored
        // 15 is the zero point 16 (4 bits).
        const std::uint32_t z = ((word >> (bits * j)) & mask) + (zeros_minus_one ? 1u : 0u);
        m.zeros[static_cast<std::size_t>((c * per_word + j) * m.num_groups + gi)] =
            static_cast<std::uint8_t>(z ^ shift);
      }
    }
    for (std::int64_t o = 0; o < out; ++o)
      m.scales[static_cast<std::size_t>(o * m.num_groups + gi)] = scales[gi * out + o];
  }
  return m;
}

}  // namespace inflight::model
