#include "kernels/cpu/linear.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace inflight::kernels::cpu {
namespace {

// Four floats as one SIMD value (SSE on x86-64, NEON on arm64) through the GCC/Clang vector
// extension.
typedef float V4 __attribute__((vector_size(16)));

inline V4 LoadV4(const float* p) {
  V4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

constexpr int kRowBlock = 4;  // weight rows per micro-kernel
constexpr int kTokenBlock =
    2;  // tokens per micro-kernel; 8 accumulators + 6 operands fit 16 registers

// out[t][r] = dot(x[t], w[r]) for kTokens tokens and kRows weight rows, all of length n.
template <int kRows, int kTokens>
void MicroKernel(const float* const* w, const float* const* x, std::int64_t n,
                 float out[kTokenBlock][kRowBlock]) {
  V4 acc[kTokens][kRows] = {};
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    V4 xv[kTokens];
    for (int t = 0; t < kTokens; ++t) xv[t] = LoadV4(x[t] + i);
    for (int r = 0; r < kRows; ++r) {
      const V4 wv = LoadV4(w[r] + i);
      for (int t = 0; t < kTokens; ++t) acc[t][r] += xv[t] * wv;
    }
  }
  for (int t = 0; t < kTokens; ++t) {
    for (int r = 0; r < kRows; ++r) {
      float s = (acc[t][r][0] + acc[t][r][1]) + (acc[t][r][2] + acc[t][r][3]);
      for (std::int64_t j = i; j < n; ++j) s += x[t][j] * w[r][j];
      out[t][r] = s;
    }
  }
}

template <int kRows>
void RowBlock(float* y, const float* x, std::int64_t x_stride, const float* const* w,
              std::int64_t row0, std::int64_t num_tokens, std::int64_t in_features,
              std::int64_t out_features) {
  float out[kTokenBlock][kRowBlock];
  std::int64_t t = 0;
  for (; t + kTokenBlock <= num_tokens; t += kTokenBlock) {
    const float* xs[kTokenBlock] = {x + t * x_stride, x + (t + 1) * x_stride};
    MicroKernel<kRows, kTokenBlock>(w, xs, in_features, out);
    for (int tt = 0; tt < kTokenBlock; ++tt)
      for (int r = 0; r < kRows; ++r) y[(t + tt) * out_features + row0 + r] = out[tt][r];
  }
  for (; t < num_tokens; ++t) {
    const float* xs[1] = {x + t * x_stride};
    MicroKernel<kRows, 1>(w, xs, in_features, out);
    for (int r = 0; r < kRows; ++r) y[t * out_features + row0 + r] = out[0][r];
  }
}

void LinearRows(float* y, const float* x, std::int64_t x_stride, WeightPtr w, WeightPtr bias,
                std::int64_t num_tokens, std::int64_t in_features, std::int64_t out_features,
                std::int64_t row_begin, std::int64_t row_end) {
  // Non-fp32 weights are widened a row block at a time, then reused by every token.
  std::vector<float> scratch;
  if (w.dtype != DType::kFloat32) scratch.resize(static_cast<std::size_t>(kRowBlock * in_features));
  for (std::int64_t r0 = row_begin; r0 < row_end; r0 += kRowBlock) {
    const int rows = static_cast<int>(std::min<std::int64_t>(kRowBlock, row_end - r0));
    const float* wr[kRowBlock];
    for (int r = 0; r < rows; ++r) {
      if (w.dtype == DType::kFloat32) {
        wr[r] = static_cast<const float*>(w.data) + (r0 + r) * in_features;
      } else {
        float* dst = scratch.data() + r * in_features;
        w.LoadRange((r0 + r) * in_features, in_features, dst);
        wr[r] = dst;
      }
    }
    switch (rows) {
      case 4:
        RowBlock<4>(y, x, x_stride, wr, r0, num_tokens, in_features, out_features);
        break;
      case 3:
        RowBlock<3>(y, x, x_stride, wr, r0, num_tokens, in_features, out_features);
        break;
      case 2:
        RowBlock<2>(y, x, x_stride, wr, r0, num_tokens, in_features, out_features);
        break;
      default:
        RowBlock<1>(y, x, x_stride, wr, r0, num_tokens, in_features, out_features);
        break;
    }
    if (bias) {
      for (std::int64_t t = 0; t < num_tokens; ++t)
        for (int r = 0; r < rows; ++r) y[t * out_features + r0 + r] += bias.Load(r0 + r);
    }
  }
}

}  // namespace

void Linear(float* y, const float* x, std::int64_t x_stride, WeightPtr w, WeightPtr bias,
            std::int64_t num_tokens, std::int64_t in_features, std::int64_t out_features,
            ThreadPool* pool) {
  if (num_tokens <= 0 || out_features <= 0) return;
  const std::int64_t num_row_blocks = (out_features + kRowBlock - 1) / kRowBlock;
  // A chunk should be worth waking a thread for: about 64K multiply-adds.
  const std::int64_t macs_per_block = kRowBlock * in_features * num_tokens;
  const std::int64_t min_blocks =
      std::max<std::int64_t>(1, (1 << 16) / std::max<std::int64_t>(1, macs_per_block));
  ParallelFor(pool, num_row_blocks, min_blocks, [&](std::int64_t b0, std::int64_t b1) {
    LinearRows(y, x, x_stride, w, bias, num_tokens, in_features, out_features, b0 * kRowBlock,
               std::min(out_features, b1 * kRowBlock));
  });
}

}  // namespace inflight::kernels::cpu
