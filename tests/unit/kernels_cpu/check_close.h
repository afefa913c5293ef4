// Comparison helpers for the CPU op tests: a normalised error bound and a readable failure report.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace inflight::kernels::cpu::testing {

// Every found[i] must satisfy |found[i] - expected[i]| <= tol * scale, where scale is the RMS of
// `expected` (at least 1e-6), so the bound means the same for tiny and large outputs. NaN never
// passes. On failure prints the first mismatches with index, found, expected, bound and the seed.
inline ::testing::AssertionResult CheckClose(const float* found, const double* expected,
                                             std::size_t n, double tol, std::uint64_t seed) {
  double sum_sq = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum_sq += expected[i] * expected[i];
  const double scale = std::max(1e-6, std::sqrt(sum_sq / std::max<std::size_t>(1, n)));
  const double bound = tol * scale;
  std::ostringstream msg;
  int num_bad = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double err = std::fabs(static_cast<double>(found[i]) - expected[i]);
    if (!(err <= bound)) {
      if (num_bad < 8)
        msg << "  [" << i << "] found " << found[i] << " expected " << expected[i] << " |err| "
            << err << " > bound " << bound << "\n";
      ++num_bad;
      if (!(err <= worst)) worst = err;
    }
  }
  if (num_bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << num_bad << " of " << n << " elements off (seed " << seed << ", tol " << tol << " x rms "
         << scale << ", worst " << worst << "):\n"
         << msg.str();
}

inline ::testing::AssertionResult CheckClose(const std::vector<float>& found,
                                             const std::vector<double>& expected, double tol,
                                             std::uint64_t seed) {
  if (found.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << found.size() << " != " << expected.size();
  return CheckClose(found.data(), expected.data(), found.size(), tol, seed);
}

inline std::vector<float> RandomFloats(std::mt19937_64& rng, std::size_t n, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace inflight::kernels::cpu::testing

#include "common/dtype.h"
#include "kernels/cpu/weight_ptr.h"

namespace inflight::kernels::cpu::testing {

// Weights stored as `dtype`, and their exact values (after rounding) for computing expectations.
struct TypedWeights {
  DType dtype = DType::kFloat32;
  std::vector<float> f32;
  std::vector<std::uint16_t> bits16;
  std::vector<double> exact;

  WeightPtr ptr() const {
    return dtype == DType::kFloat32 ? WeightPtr(f32.data(), dtype)
                                    : WeightPtr(bits16.data(), dtype);
  }
};

// Rounds through common/dtype.h's conversions, which are independent of WeightPtr's fp16 decoder.
inline TypedWeights MakeTypedWeights(const std::vector<float>& values, DType dtype) {
  TypedWeights w;
  w.dtype = dtype;
  for (float v : values) {
    if (dtype == DType::kFloat32) {
      w.f32.push_back(v);
      w.exact.push_back(v);
    } else if (dtype == DType::kFloat16) {
      w.bits16.push_back(FloatToFp16(v));
      w.exact.push_back(Fp16ToFloat(w.bits16.back()));
    } else {
      w.bits16.push_back(FloatToBf16(v));
      w.exact.push_back(Bf16ToFloat(w.bits16.back()));
    }
  }
  return w;
}

inline const DType kWeightDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

}  // namespace inflight::kernels::cpu::testing
