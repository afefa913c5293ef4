#include "model/quantized_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/dtype.h"
#include "common/fp8_e4m3.h"

namespace inflight::model {
namespace {

std::size_t At(std::int64_t r, std::int64_t c, std::int64_t cols) {
  return static_cast<std::size_t>(r * cols + c);
}

QuantizedMatrix Empty(QuantAlgo algo, std::int64_t rows, std::int64_t cols, std::int64_t group) {
  QuantizedMatrix m;
  m.algo = algo;
  m.rows = rows;
  m.cols = cols;
  m.group_size = group > 0 && group < cols ? group : 0;
  m.num_groups = m.group_size > 0 ? (cols + m.group_size - 1) / m.group_size : 1;
  m.codes.resize(static_cast<std::size_t>(rows * cols));
  m.scales.resize(static_cast<std::size_t>(rows * m.num_groups));
  return m;
}

// Symmetric integer quantization over groups: scale = amax / qmax, code = clamp(round(w / scale)).
QuantizedMatrix QuantizeIntSymmetric(QuantAlgo algo, const float* w, std::int64_t rows,
                                     std::int64_t cols, std::int64_t group_size, int qmax,
                                     int offset) {
  QuantizedMatrix m = Empty(algo, rows, cols, group_size);
  const std::int64_t g = m.group_size > 0 ? m.group_size : cols;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t gi = 0; gi < m.num_groups; ++gi) {
      const std::int64_t c0 = gi * g, c1 = std::min(cols, c0 + g);
      float amax = 0.0f;
      for (std::int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[At(r, c, cols)]));
      const float scale = amax > 0.0f ? amax / static_cast<float>(qmax) : 1.0f;
      m.scales[At(r, gi, m.num_groups)] = scale;
      for (std::int64_t c = c0; c < c1; ++c) {
        const float q = std::nearbyint(w[At(r, c, cols)] / scale);
        const int v = static_cast<int>(
            std::clamp(q, static_cast<float>(-qmax - (offset ? 1 : 0)), static_cast<float>(qmax)));
        m.codes[At(r, c, cols)] = static_cast<std::uint8_t>(v + offset);
      }
    }
  }
  return m;
}

}  // namespace

float QuantizedMatrix::Dequantize(std::int64_t r, std::int64_t c) const {
  const std::uint8_t code = codes[At(r, c, cols)];
  const std::int64_t g = GroupOf(c);
  const float scale = scales[At(r, g, num_groups)];
  const std::uint8_t zero = zeros.empty() ? ImplicitZero() : zeros[At(r, g, num_groups)];
  switch (algo) {
    case QuantAlgo::kFp8:
      return Fp8E4M3ToFloat(code) * scale;
    case QuantAlgo::kInt8Wo:
      return static_cast<float>(static_cast<std::int8_t>(code) - static_cast<std::int8_t>(zero)) *
             scale;
    case QuantAlgo::kInt4Wo:
      return static_cast<float>(static_cast<int>(code) - static_cast<int>(zero)) * scale;
    case QuantAlgo::kNone:
      break;
  }
  return 0.0f;
}

std::vector<float> QuantizedMatrix::DequantizeAll() const {
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out[At(r, c, cols)] = Dequantize(r, c);
  return out;
}

namespace {
void QuantizeFp8Row(const float* w, std::int64_t r, std::int64_t cols, float scale,
                    QuantizedMatrix* m) {
  m->scales[static_cast<std::size_t>(r)] = scale;
  for (std::int64_t c = 0; c < cols; ++c)
    m->codes[At(r, c, cols)] = FloatToFp8E4M3(w[At(r, c, cols)] / scale);
}
}  // namespace

float Fp8ScaleOfAmax(float amax) {
  return amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
}

QuantizedMatrix QuantizeFp8PerChannel(const float* w, std::int64_t rows, std::int64_t cols) {
  QuantizedMatrix m = Empty(QuantAlgo::kFp8, rows, cols, 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[At(r, c, cols)]));
    QuantizeFp8Row(w, r, cols, Fp8ScaleOfAmax(amax), &m);
  }
  return m;
}

QuantizedMatrix QuantizeFp8WithScale(const float* w, std::int64_t rows, std::int64_t cols,
                                     float scale) {
  QuantizedMatrix m = Empty(QuantAlgo::kFp8, rows, cols, 0);
  for (std::int64_t r = 0; r < rows; ++r) QuantizeFp8Row(w, r, cols, scale, &m);
  return m;
}

QuantizedMatrix QuantizeInt8Symmetric(const float* w, std::int64_t rows, std::int64_t cols,
                                      std::int64_t group_size) {
  // NOTE: [-127, 127], not -128: symmetric about zero, as TensorRT-LLM's int8 weight-only.
  return QuantizeIntSymmetric(QuantAlgo::kInt8Wo, w, rows, cols, group_size, 127, 0);
}

QuantizedMatrix QuantizeInt4Symmetric(const float* w, std::int64_t rows, std::int64_t cols,
                                      std::int64_t group_size) {
  // Codes -8..7 stored +8: the implicit zero point 8.
  return QuantizeIntSymmetric(QuantAlgo::kInt4Wo, w, rows, cols, group_size, 7, 8);
}

QuantizedMatrix SliceRows(const QuantizedMatrix& m, std::int64_t r0, std::int64_t r1) {
  QuantizedMatrix s = m;
  s.rows = r1 - r0;
  s.codes.assign(m.codes.begin() + static_cast<std::ptrdiff_t>(r0 * m.cols),
                 m.codes.begin() + static_cast<std::ptrdiff_t>(r1 * m.cols));
  const auto g = static_cast<std::ptrdiff_t>(m.num_groups);
  s.scales.assign(m.scales.begin() + r0 * g, m.scales.begin() + r1 * g);
  if (!m.zeros.empty()) s.zeros.assign(m.zeros.begin() + r0 * g, m.zeros.begin() + r1 * g);
  return s;
}

Result<QuantizedMatrix> SliceCols(const QuantizedMatrix& m, std::int64_t c0, std::int64_t c1,
                                  const std::string& what) {
  if (c0 == 0 && c1 == m.cols) return m;
  QuantizedMatrix s = m;
  s.cols = c1 - c0;
  s.codes.resize(static_cast<std::size_t>(m.rows * s.cols));
  for (std::int64_t r = 0; r < m.rows; ++r) {
    std::memcpy(s.codes.data() + r * s.cols, m.codes.data() + r * m.cols + c0,
                static_cast<std::size_t>(s.cols));
  }
  if (!m.g_idx.empty()) {
    // Act-order groups are scattered over the columns: every group stays, the index is cut.
    s.g_idx.assign(m.g_idx.begin() + c0, m.g_idx.begin() + c1);
    return s;
  }
  if (m.group_size == 0) return s;
  const std::int64_t g = m.group_size;
  if (c0 % g != 0 || (c1 != m.cols && (c1 - c0) % g != 0)) {
    return Unsupported(what + ": the tensor-parallel slice of input columns [" +
                       std::to_string(c0) + ", " + std::to_string(c1) + ") cuts scale groups of " +
                       "group_size " + std::to_string(g) +
                       "; choose a tp_size whose slices are multiples of the group size");
  }
  const std::int64_t g0 = c0 / g, g1 = (c1 + g - 1) / g;
  s.num_groups = g1 - g0;
  s.scales.resize(static_cast<std::size_t>(m.rows * s.num_groups));
  if (!m.zeros.empty()) s.zeros.resize(s.scales.size());
  for (std::int64_t r = 0; r < m.rows; ++r) {
    for (std::int64_t k = 0; k < s.num_groups; ++k) {
      s.scales[At(r, k, s.num_groups)] = m.scales[At(r, g0 + k, m.num_groups)];
      if (!m.zeros.empty()) s.zeros[At(r, k, s.num_groups)] = m.zeros[At(r, g0 + k, m.num_groups)];
    }
  }
  return s;
}

Status WriteQuantPart(const QuantConfig& q, QuantPart p, const QuantizedMatrix& m, std::byte* dst) {
  if (m.algo != q.quant_algo) {
    return Internal(std::string("quantized matrix is ") + QuantAlgoName(m.algo) +
                    ", the engine's quant_algo " + QuantAlgoName(q.quant_algo));
  }
  switch (p) {
    case QuantPart::kWeight:
      if (q.quant_algo != QuantAlgo::kInt4Wo) {
        std::memcpy(dst, m.codes.data(), m.codes.size());
        return Status::Ok();
      }
      // Two codes a byte along the input dimension: column 2j in the low nibble, 2j + 1 high.
      for (std::int64_t r = 0; r < m.rows; ++r) {
        for (std::int64_t j = 0; j < m.cols / 2; ++j) {
          const std::uint8_t lo = m.codes[At(r, 2 * j, m.cols)] & 0xfu;
          const std::uint8_t hi = m.codes[At(r, 2 * j + 1, m.cols)] & 0xfu;
          dst[At(r, j, m.cols / 2)] = static_cast<std::byte>(lo | (hi << 4));
        }
      }
      return Status::Ok();
    case QuantPart::kWeightScale:
      if (q.weight_granularity == WeightScaleGranularity::kPerTensor) {
        for (float s : m.scales) {
          if (s != m.scales.front()) {
            return Internal("per_tensor weight scales differ between rows");
          }
        }
        std::memcpy(dst, m.scales.data(), sizeof(float));
        return Status::Ok();
      }
      std::memcpy(dst, m.scales.data(), m.scales.size() * sizeof(float));
      return Status::Ok();
    case QuantPart::kWeightZero:
      if (m.zeros.empty()) {
        std::memset(dst, m.ImplicitZero(), m.scales.size());
      } else {
        std::memcpy(dst, m.zeros.data(), m.zeros.size());
      }
      return Status::Ok();
    case QuantPart::kGroupIndex:
      if (m.g_idx.empty()) {
        for (std::int64_t c = 0; c < m.cols; ++c) {
          const auto g = static_cast<std::int32_t>(m.GroupOf(c));
          std::memcpy(dst + c * 4, &g, 4);
        }
      } else {
        std::memcpy(dst, m.g_idx.data(), m.g_idx.size() * 4);
      }
      return Status::Ok();
    case QuantPart::kInputScale:
      std::memcpy(dst, &m.input_scale, sizeof(float));
      return Status::Ok();
  }
  return Status::Ok();
}

Status WriteStackedQuantPart(const QuantConfig& q, QuantPart p,
                             const std::vector<const QuantizedMatrix*>& pieces,
                             const std::string& what, std::byte* dst) {
  if (pieces.empty()) return Internal(what + ": no pieces to stack");
  const QuantizedMatrix& first = *pieces.front();
  bool any_zeros = false;
  float input_scale = 0.0f;
  for (const QuantizedMatrix* m : pieces) {
    if (m->algo != first.algo || m->cols != first.cols || m->num_groups != first.num_groups ||
        m->group_size != first.group_size) {
      return Unsupported(what + ": its fused pieces are quantized differently (columns " +
                         std::to_string(m->cols) + " vs " + std::to_string(first.cols) +
                         ", groups " + std::to_string(m->num_groups) + " vs " +
                         std::to_string(first.num_groups) + "); one GEMM needs one layout");
    }
    if (m->g_idx != first.g_idx) {
      return Unsupported(what +
                         ": its fused pieces have different g_idx (act-order) "
                         "permutations; one GEMM needs one g_idx");
    }
    any_zeros = any_zeros || !m->zeros.empty();
    input_scale = std::max(input_scale, m->input_scale);
  }
  if (first.algo != q.quant_algo) return WriteQuantPart(q, p, first, dst);  // its error
  switch (p) {
    case QuantPart::kGroupIndex:
      return WriteQuantPart(q, p, first, dst);  // one g_idx, checked equal above
    case QuantPart::kInputScale:
      std::memcpy(dst, &input_scale, sizeof(float));
      return Status::Ok();
    case QuantPart::kWeightScale:
      if (q.weight_granularity == WeightScaleGranularity::kPerTensor) {
        for (const QuantizedMatrix* m : pieces) {
          for (float s : m->scales) {
            if (s != first.scales.front()) {
              return Internal("per_tensor weight scales differ between rows");
            }
          }
        }
        return WriteQuantPart(q, p, first, dst);
      }
      break;
    case QuantPart::kWeightZero:
      if (any_zeros) {
        // Explicit zero points for all, the implicit one written out where a piece has none.
        for (const QuantizedMatrix* m : pieces) {
          const std::size_t n = m->scales.size();
          if (m->zeros.empty()) {
            std::memset(dst, m->ImplicitZero(), n);
          } else {
            std::memcpy(dst, m->zeros.data(), n);
          }
          dst += n;
        }
        return Status::Ok();
      }
      break;
    case QuantPart::kWeight:
      break;
  }
  // Row-major parts: the stack's bytes are each piece's in turn.
  for (const QuantizedMatrix* m : pieces) {
    RETURN_IF_ERROR(WriteQuantPart(q, p, *m, dst));
    auto bytes = static_cast<std::int64_t>(DTypeSize(QuantPartDType(q, p)));
    for (const std::int64_t d : QuantPartShape(q, p, m->rows, m->cols, m->num_groups)) bytes *= d;
    dst += bytes;
  }
  return Status::Ok();
}

}  // namespace inflight::model
