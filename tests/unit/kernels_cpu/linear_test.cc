// Linear against a naive double matmul; thread counts must not change the result.
#include <gtest/gtest.h>

#include <atomic>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/thread_pool.h"
#include "unit/kernels_cpu/check_close.h"

namespace inflight::kernels::cpu {
namespace {

using testing::CheckClose;
using testing::MakeTypedWeights;
using testing::RandomFloats;

TEST(LinearTest, MatchesNaiveMatmul) {
  ThreadPool pool(3);
  std::uint64_t seed = 500;
  for (DType dtype : testing::kWeightDTypes) {
    for (std::int64_t tokens : {1, 3, 19, 99}) {
      for (std::int64_t in : {1, 111, 1025}) {
        for (std::int64_t out_features : {1, 5, 130}) {
          const bool with_bias = (seed % 2) == 0;
          SCOPED_TRACE(::testing::Message()
                       << DTypeName(dtype) << " tokens " << tokens << " in " << in << " out "
                       << out_features << " bias " << with_bias);
          std::mt19937_64 rng(seed);
          const std::int64_t x_stride =
              in + 3;  // strided input rows, as a view into a wider buffer
          auto x = RandomFloats(rng, tokens * x_stride);
          auto w = MakeTypedWeights(RandomFloats(rng, out_features * in), dtype);
          auto b = MakeTypedWeights(RandomFloats(rng, out_features), dtype);
          std::vector<double> expected(tokens * out_features);
          for (std::int64_t t = 0; t < tokens; ++t)
            for (std::int64_t o = 0; o < out_features; ++o) {
              double s = with_bias ? b.exact[o] : 0.0;
              for (std::int64_t i = 0; i < in; ++i)
                s += double(x[t * x_stride + i]) * w.exact[o * in + i];
              expected[t * out_features + o] = s;
            }
          std::vector<float> y(tokens * out_features + 8, 777.0f);
          Linear(y.data(), x.data(), x_stride, w.ptr(), with_bias ? b.ptr() : WeightPtr(), tokens,
                 in, out_features, &pool);
          for (int g = 0; g < 8; ++g) ASSERT_EQ(y[tokens * out_features + g], 777.0f) << "guard";
          y.resize(tokens * out_features);
          // fp32 accumulation over `in` terms: error grows like sqrt(in) ulps of the partial sums.
          EXPECT_TRUE(CheckClose(y, expected, 2e-6 * std::sqrt(double(in)) + 1e-6, seed));

          std::vector<float> y_serial(tokens * out_features);
          Linear(y_serial.data(), x.data(), x_stride, w.ptr(), with_bias ? b.ptr() : WeightPtr(),
                 tokens, in, out_features, nullptr);
          EXPECT_EQ(y, y_serial) << "threaded result differs from serial";
          ++seed;
        }
      }
    }
  }
}

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (std::int64_t n : {1, 2, 7, 100, 1001}) {
      for (std::int64_t min_chunk : {1, 3, 1000}) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<int> calls{0};
        pool.ParallelFor(n, min_chunk, [&](std::int64_t b, std::int64_t e) {
          ++calls;
          EXPECT_LT(b, e);
          for (std::int64_t i = b; i < e; ++i) ++hits[i];
        });
        for (std::int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), 1) << "n " << n << " i " << i;
        EXPECT_LE(calls.load(), threads);
        if (n >= min_chunk * threads) {
          EXPECT_EQ(calls.load(), threads) << "n " << n;
        }
      }
    }
  }
}

TEST(ThreadPoolTest, NestedCallRunsInline) {
  ThreadPool pool(3);
  std::atomic<int> total{0};
  pool.ParallelFor(6, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i)
      pool.ParallelFor(4, 1, [&](std::int64_t b2, std::int64_t e2) { total += int(e2 - b2); });
  });
  EXPECT_EQ(total.load(), 24);
}

}  // namespace
}  // namespace inflight::kernels::cpu
