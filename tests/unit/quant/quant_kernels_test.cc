// The CPU quantized ops against slow references on random data: weight dequantization of every
// layout (kernels/cpu/dequantize.h), FP8 activation quantization, and the FP8 KV cache (write,
// then paged attention reading it) against the float cache holding the dequantized values.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "common/fp8_e4m3.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/fp8_activation.h"
#include "kernels/cpu/kv_cache_write.h"
#include "kernels/cpu/kv_cache_write_fp8.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/paged_attention_fp8.h"

namespace inflight::kernels::cpu {
namespace {

std::vector<float> RandomFloats(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<std::uint8_t> RandomBytes(std::size_t n, std::uint32_t seed, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(0, hi);
  std::vector<std::uint8_t> v(n);
  for (auto& x : v) x = static_cast<std::uint8_t>(u(rng));
  return v;
}

struct Case {
  std::int64_t rows, cols, group;  // group 0: per channel
  bool zeros, g_idx;
};

TEST(Dequantize, Int4PackedWithGroupsZerosAndGroupIndex) {
  for (const Case c : {Case{3, 8, 0, false, false}, Case{19, 64, 16, true, false},
                       Case{7, 96, 32, true, true}, Case{5, 34, 8, false, true}}) {
    const std::int64_t groups = c.group ? (c.cols + c.group - 1) / c.group : 1;
    std::vector<std::uint8_t> codes = RandomBytes(c.rows * c.cols, 1, 15);
    std::vector<std::uint8_t> packed(c.rows * c.cols / 2);
    for (std::int64_t i = 0; i < c.rows * c.cols; i += 2)
      packed[i / 2] = static_cast<std::uint8_t>(codes[i] | (codes[i + 1] << 4));
    const auto scales = RandomFloats(c.rows * groups, 2, 0.01f, 0.1f);
    const auto zeros = RandomBytes(c.rows * groups, 3, 16);  // GPTQ v1 zero points reach 16
    std::vector<std::int32_t> g_idx(c.cols);
    std::mt19937 rng(4);
    for (auto& g : g_idx) g = static_cast<std::int32_t>(rng() % groups);
    QuantizedWeightView v;
    v.kind = QuantizedWeightKind::kInt4;
    v.codes = packed.data();
    v.scales = scales.data();
    v.num_groups = groups;
    v.group_size = c.group;
    v.zeros = c.zeros ? zeros.data() : nullptr;
    v.g_idx = c.g_idx ? g_idx.data() : nullptr;
    std::vector<float> out(c.rows * c.cols, NAN);
    DequantizeWeight(v, c.rows, c.cols, out.data(), nullptr);
    for (std::int64_t r = 0; r < c.rows; ++r) {
      for (std::int64_t i = 0; i < c.cols; ++i) {
        const std::int64_t g = c.g_idx ? g_idx[i] : (c.group ? i / c.group : 0);
        const int z = c.zeros ? zeros[r * groups + g] : 8;
        const float want = static_cast<float>(codes[r * c.cols + i] - z) * scales[r * groups + g];
        ASSERT_EQ(out[r * c.cols + i], want)
            << "row " << r << " col " << i << " rows " << c.rows << " cols " << c.cols;
      }
    }
  }
}

TEST(Dequantize, Int8SignedWithAndWithoutZeros) {
  const std::int64_t rows = 11, cols = 40, group = 8, groups = 5;
  const auto codes = RandomBytes(rows * cols, 5, 255);
  const auto zeros = RandomBytes(rows * groups, 6, 255);
  const auto scales = RandomFloats(rows * groups, 7, 0.001f, 0.01f);
  for (bool with_zeros : {false, true}) {
    QuantizedWeightView v;
    v.kind = QuantizedWeightKind::kInt8;
    v.codes = codes.data();
    v.scales = scales.data();
    v.num_groups = groups;
    v.group_size = group;
    v.zeros = with_zeros ? zeros.data() : nullptr;
    std::vector<float> out(rows * cols);
    DequantizeWeight(v, rows, cols, out.data(), nullptr);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < cols; ++i) {
        const int q = static_cast<std::int8_t>(codes[r * cols + i]);
        const int z = with_zeros ? static_cast<std::int8_t>(zeros[r * groups + i / group]) : 0;
        ASSERT_EQ(out[r * cols + i], static_cast<float>(q - z) * scales[r * groups + i / group]);
      }
  }
}

TEST(Dequantize, Fp8PerTensorAndPerChannel) {
  const std::int64_t rows = 9, cols = 13;
  std::vector<std::uint8_t> codes = RandomBytes(rows * cols, 8, 255);
  for (auto& c : codes)
    if ((c & 0x7f) == 0x7f) c = 0;  // no NaN codes in a weight
  const auto scales = RandomFloats(rows, 9, 0.001f, 0.01f);
  for (bool per_tensor : {true, false}) {
    QuantizedWeightView v;
    v.kind = QuantizedWeightKind::kFp8E4M3;
    v.codes = codes.data();
    v.scales = scales.data();
    v.per_tensor = per_tensor;
    std::vector<float> out(rows * cols);
    DequantizeWeight(v, rows, cols, out.data(), nullptr);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < cols; ++i)
        ASSERT_EQ(out[r * cols + i],
                  Fp8E4M3ToFloat(codes[r * cols + i]) * scales[per_tensor ? 0 : r]);
  }
}

TEST(Fp8Activation, PerTokenScalesToTheRowMaximumAndStaticSaturates) {
  const std::int64_t T = 5, n = 37, stride = 40;
  auto x = RandomFloats(T * stride, 10, -3.0f, 3.0f);
  x[2 * stride + 7] = 0.0f;
  std::fill(x.begin() + 3 * stride, x.begin() + 3 * stride + n, 0.0f);  // a row of zeros
  const auto original = x;
  QuantizeActivationsFp8(x.data(), T, n, stride, 0.0f);
  for (std::int64_t t = 0; t < T; ++t) {
    float amax = 0;
    for (std::int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(original[t * stride + i]));
    const float s = amax > 0 ? amax / 448.0f : 1.0f;
    for (std::int64_t i = 0; i < n; ++i) {
      const float o = original[t * stride + i];
      ASSERT_EQ(x[t * stride + i], Fp8E4M3ToFloat(FloatToFp8E4M3(o / s)) * s);
      ASSERT_LE(std::fabs(x[t * stride + i] - o), std::fabs(o) / 16 + 1e-30f);  // 3 mantissa bits
    }
    for (std::int64_t i = n; i < stride; ++i)
      ASSERT_EQ(x[t * stride + i], original[t * stride + i]);
  }
  // The row maximum is exact (it maps to 448).
  std::vector<float> row{1.0f, -2.5f, 0.3f};
  QuantizeActivationsFp8(row.data(), 1, 3, 3, 0.0f);
  EXPECT_EQ(row[1], -2.5f);
  // A static scale of 0.001 saturates 1.0 at 0.448.
  std::vector<float> big{1.0f, -0.1f};
  QuantizeActivationsFp8(big.data(), 1, 2, 2, 0.001f);
  EXPECT_FLOAT_EQ(big[0], 0.448f);
  EXPECT_NEAR(big[1], -0.1f, 0.1f / 16);
}

// The FP8 cache written and read through the paged kernels equals the float cache holding the
// dequantized values, value for value; unused slots of the pools are never read (NaN codes).
TEST(KvCacheFp8, AttentionEqualsTheFloatCacheOfTheSameValues) {
  const PagedKvShape shape{2, 4, 16};
  const std::int64_t num_blocks = 9, num_heads = 4, pool = num_blocks * shape.BlockFloats();
  // Two sequences: 5 cached + 3 new, 0 cached + 6 new; non-monotonic block tables.
  const std::vector<std::int32_t> query_start{0, 3, 9}, num_cached{5, 0};
  const std::vector<std::int32_t> tables{7, 2, 0, 5, 1, 8};
  PagedBatch batch{2, query_start.data(), num_cached.data(), tables.data(), 3};
  const std::int64_t kv_stride = 3 * shape.num_kv_heads * shape.head_dim;
  const float k_scale = 0.02f, v_scale = 0.05f;
  std::vector<std::uint8_t> k8(pool, 0x7f), v8(pool, 0x7f);  // NaN everywhere unwritten
  std::vector<float> kf(pool, NAN), vf(pool, NAN);
  // The cached prefix of sequence 0 (positions 0..4), written as a step of its own.
  const std::vector<std::int32_t> prefix_start{0, 5}, prefix_cached{0};
  PagedBatch prefix{1, prefix_start.data(), prefix_cached.data(), tables.data(), 3};
  for (const auto& [b, seed] : {std::pair{prefix, 11u}, std::pair{batch, 12u}}) {
    const std::int64_t T = b.num_tokens();
    auto kv = RandomFloats(T * kv_stride, seed, -3.0f, 3.0f);
    const float* k = kv.data();
    const float* v = kv.data() + shape.num_kv_heads * shape.head_dim;
    KvCacheWriteFp8(k8.data(), v8.data(), k, v, kv_stride, b, shape, k_scale, v_scale);
    // The float cache gets the values the FP8 cache dequantizes to.
    std::vector<float> kd(kv.size()), vd(kv.size());
    for (std::size_t i = 0; i < kv.size(); ++i) {
      kd[i] = Fp8E4M3ToFloat(FloatToFp8E4M3(kv[i] / k_scale)) * k_scale;
      vd[i] = Fp8E4M3ToFloat(FloatToFp8E4M3(kv[i] / v_scale)) * v_scale;
    }
    KvCacheWrite(kf.data(), vf.data(), kd.data(), vd.data() + shape.num_kv_heads * shape.head_dim,
                 kv_stride, b, shape);
  }
  const std::int64_t T = batch.num_tokens();
  const auto q = RandomFloats(T * num_heads * shape.head_dim, 13, -1.0f, 1.0f);
  for (const AttentionWindow w : {AttentionWindow{0, 0}, AttentionWindow{3, 1}}) {
    std::vector<float> out8(q.size(), NAN), outf(q.size(), NAN);
    PagedAttentionFp8(out8.data(), q.data(), num_heads * shape.head_dim, k8.data(), v8.data(),
                      k_scale, v_scale, batch, shape, num_heads, 0.25f, w, nullptr);
    PagedAttention(outf.data(), q.data(), num_heads * shape.head_dim, kf.data(), vf.data(), batch,
                   shape, num_heads, 0.25f, w, nullptr);
    for (std::size_t i = 0; i < q.size(); ++i) {
      ASSERT_FALSE(std::isnan(out8[i])) << i;
      ASSERT_EQ(out8[i], outf[i]) << "index " << i << " window " << w.window;
    }
  }
}

}  // namespace
}  // namespace inflight::kernels::cpu
