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

constexpr int kRowBlock = 4;  // weight rows per micro-kernel call

inline float HorizontalSum(V4 v) {
  return (v[0] + v[1]) + (v[2] + v[3]);
}

// NOTE: the accumulators are named variables, not arrays: GCC kept arrays of vectors on the stack,
// which cost 4x. 8 accumulators + 2 x + 1 w operands fit the 16 SSE registers.
// out[t][r] = dot(x_t, w_r) over n for 2 tokens and 4 weight rows.
void Dot4x2(const float* const* w, const float* x0, const float* x1, std::int64_t n,
            float out[2][kRowBlock]) {
  V4 a00 = {}, a01 = {}, a02 = {}, a03 = {}, a10 = {}, a11 = {}, a12 = {}, a13 = {};
  const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const V4 xv0 = LoadV4(x0 + i), xv1 = LoadV4(x1 + i);
    V4 wv = LoadV4(w0 + i);
    a00 += xv0 * wv;
    a10 += xv1 * wv;
    wv = LoadV4(w1 + i);
    a01 += xv0 * wv;
    a11 += xv1 * wv;
    wv = LoadV4(w2 + i);
    a02 += xv0 * wv;
    a12 += xv1 * wv;
    wv = LoadV4(w3 + i);
    a03 += xv0 * wv;
    a13 += xv1 * wv;
  }
  const V4 acc[2][kRowBlock] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}};
  const float* xs[2] = {x0, x1};
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < kRowBlock; ++r) {
      float s = HorizontalSum(acc[t][r]);
      for (std::int64_t j = i; j < n; ++j) s += xs[t][j] * w[r][j];
      out[t][r] = s;
    }
  }
}

// The same sums for one token and 4 rows, in the same order (so results do not depend on pairing).
void Dot4x1(const float* const* w, const float* x0, std::int64_t n, float out[kRowBlock]) {
  V4 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const V4 xv = LoadV4(x0 + i);
    a0 += xv * LoadV4(w0 + i);
    a1 += xv * LoadV4(w1 + i);
    a2 += xv * LoadV4(w2 + i);
    a3 += xv * LoadV4(w3 + i);
  }
  const V4 acc[kRowBlock] = {a0, a1, a2, a3};
  for (int r = 0; r < kRowBlock; ++r) {
    float s = HorizontalSum(acc[r]);
    for (std::int64_t j = i; j < n; ++j) s += x0[j] * w[r][j];
    out[r] = s;
  }
}

// One token, one row, same order again.
float Dot1x1(const float* w, const float* x, std::int64_t n) {
  V4 a = {};
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) a += LoadV4(x + i) * LoadV4(w + i);
  float s = HorizontalSum(a);
  for (; i < n; ++i) s += x[i] * w[i];
  return s;
}

// y rows [row0, row0 + rows) for all tokens, from weight rows w[0, rows).
void RowBlock(float* y, const float* x, std::int64_t x_stride, const float* const* w, int rows,
              std::int64_t row0, std::int64_t num_tokens, std::int64_t in_features,
              std::int64_t out_features) {
  if (rows < kRowBlock) {
    for (std::int64_t t = 0; t < num_tokens; ++t)
      for (int r = 0; r < rows; ++r)
        y[t * out_features + row0 + r] = Dot1x1(w[r], x + t * x_stride, in_features);
    return;
  }
  float out[2][kRowBlock];
  std::int64_t t = 0;
  for (; t + 2 <= num_tokens; t += 2) {
    Dot4x2(w, x + t * x_stride, x + (t + 1) * x_stride, in_features, out);
    for (int tt = 0; tt < 2; ++tt)
      for (int r = 0; r < kRowBlock; ++r) y[(t + tt) * out_features + row0 + r] = out[tt][r];
  }
  for (; t < num_tokens; ++t) {
    Dot4x1(w, x + t * x_stride, in_features, out[0]);
    for (int r = 0; r < kRowBlock; ++r) y[t * out_features + row0 + r] = out[0][r];
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
    RowBlock(y, x, x_stride, wr, rows, r0, num_tokens, in_features, out_features);
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
