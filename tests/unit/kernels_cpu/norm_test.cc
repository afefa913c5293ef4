// RMSNorm and LayerNorm against the textbook formulas in double, with and without the fused
// residual.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/rmsnorm.h"
#include "unit/kernels_cpu/check_close.h"

namespace inflight::kernels::cpu {
namespace {

using testing::CheckClose;
using testing::MakeTypedWeights;
using testing::RandomFloats;

struct NormCase {
  std::int64_t tokens, hidden;
  DType dtype;
  bool residual;
};

std::vector<NormCase> AllCases() {
  std::vector<NormCase> cases;
  for (std::int64_t tokens : {1, 3, 19, 99})
    for (std::int64_t hidden : {111, 1025})
      for (DType dtype : testing::kWeightDTypes)
        for (bool residual : {false, true}) cases.push_back({tokens, hidden, dtype, residual});
  return cases;
}

// Expected normalised rows in double; `rms` picks RMSNorm, else LayerNorm (bias may be empty).
std::vector<double> ExpectedNorm(bool rms, const std::vector<double>& input, std::int64_t tokens,
                                 std::int64_t hidden, const std::vector<double>& w,
                                 const std::vector<double>& b, double eps) {
  std::vector<double> out(input.size());
  for (std::int64_t t = 0; t < tokens; ++t) {
    const double* x = input.data() + t * hidden;
    double mean = 0.0, var = 0.0;
    if (!rms) {
      for (std::int64_t i = 0; i < hidden; ++i) mean += x[i] / hidden;
    }
    for (std::int64_t i = 0; i < hidden; ++i) var += (x[i] - mean) * (x[i] - mean) / hidden;
    for (std::int64_t i = 0; i < hidden; ++i) {
      double y = (x[i] - mean) / std::sqrt(var + eps) * w[i];
      if (!b.empty()) y += b[i];
      out[t * hidden + i] = y;
    }
  }
  return out;
}

void RunNormCase(bool rms, const NormCase& c, bool with_bias, std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << (rms ? "rmsnorm" : "layernorm") << " tokens " << c.tokens
                                    << " hidden " << c.hidden << " dtype " << DTypeName(c.dtype)
                                    << " residual " << c.residual << " bias " << with_bias);
  std::mt19937_64 rng(seed);
  const std::size_t n = static_cast<std::size_t>(c.tokens * c.hidden);
  // An offset in x makes LayerNorm's mean matter.
  std::vector<float> x = RandomFloats(rng, n, -2.0f, 3.0f);
  std::vector<float> residual = RandomFloats(rng, n, -1.0f, 1.0f);
  auto w =
      MakeTypedWeights(RandomFloats(rng, static_cast<std::size_t>(c.hidden), 0.5f, 1.5f), c.dtype);
  auto b = MakeTypedWeights(RandomFloats(rng, static_cast<std::size_t>(c.hidden)), c.dtype);
  const float eps = 1e-5f;

  std::vector<double> input(n);
  for (std::size_t i = 0; i < n; ++i) input[i] = c.residual ? double(x[i]) + residual[i] : x[i];
  const auto expected = ExpectedNorm(rms, input, c.tokens, c.hidden, w.exact,
                                     with_bias ? b.exact : std::vector<double>{}, eps);

  // Guard values after the output catch writes past the end.
  std::vector<float> out(n + 16, 12345.0f);
  std::vector<float> res = residual;
  float* res_ptr = c.residual ? res.data() : nullptr;
  if (rms) {
    RmsNorm(out.data(), x.data(), res_ptr, w.ptr(), c.tokens, c.hidden, eps);
  } else {
    LayerNorm(out.data(), x.data(), res_ptr, w.ptr(), with_bias ? b.ptr() : WeightPtr(), c.tokens,
              c.hidden, eps);
  }
  for (std::size_t i = n; i < out.size(); ++i) ASSERT_EQ(out[i], 12345.0f) << "guard " << i;
  out.resize(n);
  EXPECT_TRUE(CheckClose(out, expected, 2e-6, seed));
  if (c.residual) {
    // The residual stream becomes x + residual exactly (one fp32 add).
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(res[i], x[i] + residual[i]) << "residual " << i;
  }
}

TEST(NormTest, RmsNormMatchesFormula) {
  std::uint64_t seed = 100;
  for (const auto& c : AllCases()) RunNormCase(true, c, false, seed++);
}

TEST(NormTest, LayerNormMatchesFormula) {
  std::uint64_t seed = 200;
  for (const auto& c : AllCases())
    for (bool bias : {false, true}) RunNormCase(false, c, bias, seed++);
}

// Qwen3's q/k norm: each head of each strided row normalised on its own, the rest of the row (the
// other heads of a fused qkv row) untouched.
TEST(NormTest, HeadRmsNormNormalisesEachHeadInPlace) {
  std::uint64_t seed = 300;
  for (std::int64_t head_dim : {64, 80, 128, 12})
    for (std::int64_t heads : {1, 3, 8})
      for (DType dtype : testing::kWeightDTypes) {
        SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << " heads " << heads
                                          << " dtype " << DTypeName(dtype));
        std::mt19937_64 rng(seed);
        const std::int64_t tokens = 5, stride = (heads + 3) * head_dim + 8;
        // Heads of very different scales: the norm must bring each to its own rms 1.
        std::vector<float> x = RandomFloats(rng, static_cast<std::size_t>(tokens * stride));
        for (std::int64_t t = 0; t < tokens; ++t)
          for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t d = 0; d < head_dim; ++d)
              x[static_cast<std::size_t>(t * stride + h * head_dim + d)] *=
                  static_cast<float>(std::pow(10.0, static_cast<double>((t + h) % 5) - 2));
        auto w = MakeTypedWeights(RandomFloats(rng, static_cast<std::size_t>(head_dim), 0.2f, 2.0f),
                                  dtype);
        const float eps = 1e-6f;
        std::vector<double> expected(x.begin(), x.end());
        for (std::int64_t t = 0; t < tokens; ++t)
          for (std::int64_t h = 0; h < heads; ++h) {
            double* head = expected.data() + t * stride + h * head_dim;
            double sum_sq = 0.0;
            for (std::int64_t d = 0; d < head_dim; ++d) sum_sq += head[d] * head[d];
            const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(head_dim) + eps);
            for (std::int64_t d = 0; d < head_dim; ++d) head[d] *= inv * w.exact[d];
          }
        const std::vector<float> before = x;
        HeadRmsNorm(x.data(), tokens, heads, head_dim, stride, w.ptr(), eps);
        for (std::int64_t t = 0; t < tokens; ++t) {
          EXPECT_TRUE(CheckClose(x.data() + t * stride, expected.data() + t * stride,
                                 static_cast<std::size_t>(heads * head_dim), 2e-6, seed));
          for (std::int64_t i = heads * head_dim; i < stride; ++i)
            ASSERT_EQ(x[t * stride + i], before[t * stride + i]) << "outside the heads: " << i;
        }
        ++seed;
      }
}

TEST(NormTest, InPlaceOutputAliasesInput) {
  std::mt19937_64 rng(7);
  const std::int64_t tokens = 3, hidden = 111;
  auto x = RandomFloats(rng, tokens * hidden);
  auto w = MakeTypedWeights(RandomFloats(rng, hidden), DType::kFloat32);
  std::vector<float> separate(x.size());
  RmsNorm(separate.data(), x.data(), nullptr, w.ptr(), tokens, hidden, 1e-6f);
  RmsNorm(x.data(), x.data(), nullptr, w.ptr(), tokens, hidden, 1e-6f);
  EXPECT_EQ(x, separate);
}

}  // namespace
}  // namespace inflight::kernels::cpu
