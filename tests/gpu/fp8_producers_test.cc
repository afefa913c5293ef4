// The kernels that write a W8A8 linear's input as FP8 codes
// (kernels/cuda/fp8_activation_producers.h) against the two passes they replace: RMSNorm then the
// quantize pass, and the gate/up epilogue with SwiGLU then the quantize pass. Both must give the
// same codes and row scales bit for bit (those passes are checked against the CPU in norm_test and
// quant_linear_test); the dequantized norm output is also held against the CPU RMSNorm within
// E4M3's rounding. The FP8 gate/up GEMM with SwiGLU and the codes in its epilogue
// (kernels/cuda/gemm_swiglu_fp8.h) sums in another order than cuBLASLt, so against the two kernels
// it replaces its codes may differ by one step where a bf16 product lands on the other side of a
// rounding boundary; it is also held against a CPU reference in double on the same codes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/fp8_e4m3.h"
#include "gpu_test_util.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cuda/fp8_activation_producers.h"
#include "kernels/cuda/gemm_swiglu_fp8.h"
#include "kernels/cuda/quant_activation_fp8.h"
#include "kernels/cuda/quant_gemm_fp8.h"
#include "kernels/cuda/rmsnorm.h"

namespace inflight::gpu_test {
namespace {

namespace kc = kernels::cuda;

// E4M3 to float on the host (normal and subnormal codes; the producers never write NaN).
float E4M3Value(std::uint8_t code) {
  const int sign = code >> 7, exp = (code >> 3) & 0xf, man = code & 0x7;
  const float v = exp == 0 ? static_cast<float>(man) / 8.0f * 0.015625f
                           : (1.0f + static_cast<float>(man) / 8.0f) * std::ldexp(1.0f, exp - 7);
  return sign ? -v : v;
}

struct CodesAndScales {
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
};

CodesAndScales Fetch(const DeviceArray<std::uint8_t>& codes, const DeviceArray<float>& scales) {
  return {codes.Download(), scales.Download()};
}

// Counts differing codes, prints the comparison, and checks that the codes are not mostly zero
// (which would make the comparison empty).
void ExpectSame(const std::string& name, const CodesAndScales& fused, const CodesAndScales& ref) {
  std::size_t differ = 0, nonzero = 0;
  for (std::size_t i = 0; i < fused.codes.size(); ++i) {
    differ += fused.codes[i] != ref.codes[i];
    nonzero += (fused.codes[i] & 0x7f) != 0;
  }
  const bool scales_equal = fused.scales == ref.scales;
  std::printf("  %-44s %zu of %zu codes differ, scales %s\n", name.c_str(), differ,
              fused.codes.size(), scales_equal ? "equal" : "DIFFER");
  GPU_CHECK(differ == 0 && scales_equal, name + ": fused and two-pass codes differ");
  GPU_CHECK(nonzero > fused.codes.size() / 2, name + ": most codes are zero");
}

void CheckRmsNorm(DType dtype, int tokens, int hidden, float static_scale) {
  const std::string name = "rmsnorm " + Describe(dtype) + " tokens=" + std::to_string(tokens) +
                           " hidden=" + std::to_string(hidden) +
                           (static_scale > 0 ? " static" : " dynamic");
  const auto n = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(hidden);
  const auto x = RoundTo(dtype, RandomVector(n, -2.0f, 2.0f));
  const auto weight = RoundTo(dtype, RandomVector(static_cast<std::size_t>(hidden), 0.5f, 1.5f));
  const float eps = 1e-5f;
  DeviceArray<std::uint16_t> d_x(ToBits(dtype, x)), d_w(ToBits(dtype, weight)), normed(n);
  DeviceArray<std::uint8_t> codes(n), ref_codes(n);
  DeviceArray<float> scales(static_cast<std::size_t>(tokens)),
      ref_scales(static_cast<std::size_t>(tokens));
  GPU_CHECK(kc::RmsNormFp8Takes(hidden, d_x.get(), d_w.get(), codes.get()), name + ": refused");
  CUDA_OK(kc::RmsNormQuantFp8({codes.get(), scales.get()}, d_x.get(), d_w.get(), dtype, tokens,
                              hidden, eps, static_scale, nullptr));
  CUDA_OK(kc::RmsNorm(normed.get(), d_x.get(), nullptr, d_w.get(), dtype, tokens, hidden, eps,
                      nullptr));
  CUDA_OK(kc::QuantizeActivationsFp8(normed.get(), hidden, dtype, tokens, hidden, static_scale,
                                     ref_codes.get(), ref_scales.get(), nullptr));
  const CodesAndScales fused = Fetch(codes, scales);
  ExpectSame(name, fused, Fetch(ref_codes, ref_scales));

  std::vector<float> ref(n);
  kernels::cpu::RmsNorm(ref.data(), x.data(), nullptr, kernels::cpu::WeightPtr(weight.data()),
                        tokens, hidden, eps);
  std::vector<float> dequantized(n);
  for (std::size_t i = 0; i < n; ++i) {
    dequantized[i] = E4M3Value(fused.codes[i]) * fused.scales[i / static_cast<std::size_t>(hidden)];
  }
  // E4M3 keeps 3 mantissa bits (half an ulp: 2^-4 relative); below its smallest normal the step
  // is absolute: 2^-10 of the scale, at most 448 * 2^-10 of the row's amax (<= ~4.5 here).
  ExpectClose(name + " dequantized vs CPU", dequantized, ref, 0.01f, 0.0625f + 2 * Epsilon(dtype));
}

GPU_TEST(RmsNormQuantFp8EqualsTwoPasses) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (int tokens : {1, 7, 300})
      for (int hidden : {1032, 4096, 8192}) CheckRmsNorm(dtype, tokens, hidden, 0.0f);
  CheckRmsNorm(DType::kBFloat16, 33, 4096, 4.0f / 448.0f);
  // A decode step's rows and more.
  CheckRmsNorm(DType::kBFloat16, 1029, 4096, 0.0f);
  CheckRmsNorm(DType::kBFloat16, 2050, 4096, 4.0f / 448.0f);
}

// The codes every FP8 activation kernel writes (quant_codes.cuh's ActivationCodes8) against the
// host's conversion of the true division (the CPU runner's and the builder's rule), code for code:
// values of every magnitude from 2^-40 to bf16's largest, signed zeros and E4M3 midpoints (ties),
// under scales from 2^-95 to 2^95, so quotients below E4M3's smallest subnormal and past the float
// range are among them.
void CheckCodesOfTrueDivision(float static_scale) {
  const int k = 4096;
  std::vector<float> x(k);
  std::uniform_real_distribution<float> exponent(-40.0f, 40.0f), unit(0.0f, 1.0f);
  for (int i = 0; i < k; ++i) {
    const float magnitude = std::exp2(exponent(Rng()));
    x[static_cast<std::size_t>(i)] = unit(Rng()) < 0.5f ? -magnitude : magnitude;
  }
  x[0] = 0.0f, x[1] = -0.0f, x[2] = 3.3895e38f, x[3] = -3.3895e38f;
  // Midpoints between neighbouring E4M3 values times the scale: exact ties where s is a power of
  // two and the product fits bf16's 8 bits.
  const float s = static_scale > 0.0f ? static_scale : 1.0f;
  for (std::size_t i = 0; i < 64; ++i) {
    const float lo = Fp8E4M3ToFloat(static_cast<std::uint8_t>(i)),
                hi = Fp8E4M3ToFloat(static_cast<std::uint8_t>(i + 1));
    x[8 + i] = (lo + hi) / 2.0f * s;
  }
  const auto xb = RoundTo(DType::kBFloat16, x);
  DeviceArray<std::uint16_t> d_x(ToBits(DType::kBFloat16, xb));
  DeviceArray<std::uint8_t> codes(static_cast<std::size_t>(k));
  DeviceArray<float> scales(1);
  CUDA_OK(kc::QuantizeActivationsFp8(d_x.get(), k, DType::kBFloat16, 1, k, static_scale,
                                     codes.get(), scales.get(), nullptr));
  const std::vector<std::uint8_t> got = codes.Download();
  const float row_scale = scales.Download()[0];
  std::size_t differ = 0, first = 0;
  for (int i = 0; i < k; ++i) {
    const std::uint8_t want = FloatToFp8E4M3(xb[static_cast<std::size_t>(i)] / row_scale);
    if (got[static_cast<std::size_t>(i)] != want && differ++ == 0)
      first = static_cast<std::size_t>(i);
  }
  std::printf("  codes of x / s, s = %-12g %zu of %d differ from the true division\n", row_scale,
              differ, k);
  GPU_CHECK(differ == 0, "x = " + std::to_string(xb[first]) + " s = " + std::to_string(row_scale) +
                             ": code " + std::to_string(got[first]) + ", true division's " +
                             std::to_string(FloatToFp8E4M3(xb[first] / row_scale)));
}

GPU_TEST(ActivationCodesAreThoseOfTheTrueDivision) {
  for (float s : {0.0f, 0x1p-95f, 1e-30f, 3.7e-5f, 0.0123f, 1.0f, 0.5f, 448.0f, 1e20f, 0x1p95f}) {
    CheckCodesOfTrueDivision(s);
  }
}

// static_scale: one scale for every row, the largest of the dynamic rule's (as a calibrated
// input_scale would be); else each row's own.
void CheckSwiGlu(DType dtype, int m, int inter, bool per_channel, bool with_bias,
                 bool static_scale) {
  const std::string name = "swiglu " + Describe(dtype) + " m=" + std::to_string(m) +
                           " inter=" + std::to_string(inter) +
                           (per_channel ? " per-channel" : " per-tensor") +
                           (with_bias ? " +bias" : "") + (static_scale ? " static" : "");
  const auto n_raw = static_cast<std::size_t>(m) * 2 * static_cast<std::size_t>(inter);
  const auto n_act = n_raw / 2;
  // Unscaled FP8 products are sums of k code products: hundreds to thousands.
  DeviceArray<std::uint16_t> raw(ToBits(DType::kBFloat16, RandomVector(n_raw, -3000, 3000)));
  DeviceArray<float> row_scales(RandomVector(static_cast<std::size_t>(m), 0.001f, 0.01f));
  DeviceArray<float> col_scales(
      RandomVector(per_channel ? 2 * static_cast<std::size_t>(inter) : 1, 0.0005f, 0.002f));
  DeviceArray<std::uint16_t> bias(
      ToBits(dtype, RandomVector(2 * static_cast<std::size_t>(inter), -0.5f, 0.5f)));
  const void* b = with_bias ? bias.get() : nullptr;
  DeviceArray<std::uint8_t> codes(n_act), ref_codes(n_act);
  DeviceArray<float> scales(static_cast<std::size_t>(m)), ref_scales(static_cast<std::size_t>(m));
  DeviceArray<std::uint16_t> act(n_act);
  GPU_CHECK(
      kc::Fp8SwiGluCodesTakes(inter, raw.get(), col_scales.get(), per_channel, b, codes.get()),
      name + ": refused");
  CUDA_OK(kc::Fp8GemmSwiGluEpilogue(act.get(), inter, raw.get(), row_scales.get(), col_scales.get(),
                                    per_channel, b, dtype, m, inter, nullptr));
  float scale = 0.0f;
  if (static_scale) {
    CUDA_OK(kc::QuantizeActivationsFp8(act.get(), inter, dtype, m, inter, 0.0f, ref_codes.get(),
                                       ref_scales.get(), nullptr));
    for (float row : ref_scales.Download()) scale = std::max(scale, row);
  }
  CUDA_OK(kc::Fp8GemmSwiGluEpilogueCodes({codes.get(), scales.get()}, raw.get(), row_scales.get(),
                                         col_scales.get(), per_channel, b, dtype, m, inter, scale,
                                         nullptr));
  CUDA_OK(kc::QuantizeActivationsFp8(act.get(), inter, dtype, m, inter, scale, ref_codes.get(),
                                     ref_scales.get(), nullptr));
  ExpectSame(name, Fetch(codes, scales), Fetch(ref_codes, ref_scales));
}

GPU_TEST(SwiGluEpilogueCodesEqualsTwoPasses) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    CheckSwiGlu(dtype, 5, 14336, true, false, false);
    CheckSwiGlu(dtype, 64, 136, false, true, false);
  }
  CheckSwiGlu(DType::kBFloat16, 3, 32768, true, true, false);  // 64 KiB of shared memory a row
  CheckSwiGlu(DType::kBFloat16, 17, 7168, true, false, true);
  // A decode step's rows and more.
  CheckSwiGlu(DType::kBFloat16, 1031, 14336, true, false, false);
  CheckSwiGlu(DType::kFloat16, 601, 1032, true, true, true);
  // Past the largest row: refused, not run.
  GPU_CHECK(!kc::Fp8SwiGluCodesTakes(32776, nullptr, nullptr, false, nullptr, nullptr),
            "a row past 32768 is not refused");
}

// Normalised mean squared error of found against expected.
double Nmse(const std::vector<float>& found, const std::vector<float>& expected) {
  double err = 0.0, ref = 0.0;
  for (std::size_t i = 0; i < found.size(); ++i) {
    const double d = static_cast<double>(found[i]) - expected[i];
    err += d * d;
    ref += static_cast<double>(expected[i]) * expected[i];
  }
  return ref > 0.0 ? err / ref : err;
}

// Random E4M3 codes of values in [-range, range] (no NaN).
std::vector<std::uint8_t> RandomCodes(std::size_t n, float range) {
  std::vector<std::uint8_t> codes(n);
  const std::vector<float> v = RandomVector(n, -range, range);
  for (std::size_t i = 0; i < n; ++i) codes[i] = FloatToFp8E4M3(v[i]);
  return codes;
}

// Whether two E4M3 codes are equal or neighbours (one step apart in magnitude, the same sign, or
// both within one step of zero).
bool OneStepApart(std::uint8_t a, std::uint8_t b) {
  const int ma = a & 0x7f, mb = b & 0x7f;
  if ((a & 0x80) != (b & 0x80)) return ma <= 1 && mb <= 1;
  return std::abs(ma - mb) <= 1;
}

// The fused kernel against cuBLASLt (fast accumulation) + Fp8GemmSwiGluEpilogueCodes on every row,
// and against the CPU in double on rows_checked rows. The static scale is the largest row's
// dynamic one, as a calibration would give.
void CheckGemmSwiGluFp8(DType dtype, int m, int inter, int k, bool per_channel) {
  const std::string name = "gemm swiglu fp8 " + Describe(dtype) + " m=" + std::to_string(m) +
                           " inter=" + std::to_string(inter) + " k=" + std::to_string(k) +
                           (per_channel ? " per-channel" : " per-tensor");
  const auto M = static_cast<std::size_t>(m), I = static_cast<std::size_t>(inter),
             K = static_cast<std::size_t>(k);
  const std::vector<std::uint8_t> x = RandomCodes(M * K, 400.0f), w = RandomCodes(2 * I * K, 1.0f);
  const std::vector<float> row_scales = RandomVector(M, 0.001f, 0.01f);
  const std::vector<float> col_scales = RandomVector(per_channel ? 2 * I : 1, 0.002f, 0.02f);
  DeviceArray<std::uint8_t> d_x(x), d_w(w), codes(M * I), ref_codes(M * I);
  DeviceArray<float> d_rs(row_scales), d_cs(col_scales), scales(M), ref_scales(M);
  DeviceArray<std::uint16_t> raw(M * 2 * I);
  kc::CublasLtFp8Gemm gemm;
  GPU_CHECK(gemm.status() == CUBLAS_STATUS_SUCCESS, "cuBLASLt handle");
  GPU_CHECK(gemm.Multiply(raw.get(), d_x.get(), d_w.get(), m, 2 * std::int64_t{inter}, k,
                          nullptr) == CUBLAS_STATUS_SUCCESS,
            name + ": cuBLASLt");
  // The static scale: the largest row scale of the dynamic rule.
  CUDA_OK(kc::Fp8GemmSwiGluEpilogueCodes({ref_codes.get(), ref_scales.get()}, raw.get(), d_rs.get(),
                                         d_cs.get(), per_channel, nullptr, dtype, m, inter, 0.0f,
                                         nullptr));
  float scale = 0.0f;
  for (float row : ref_scales.Download()) scale = std::max(scale, row);
  CUDA_OK(kc::Fp8GemmSwiGluEpilogueCodes({ref_codes.get(), ref_scales.get()}, raw.get(), d_rs.get(),
                                         d_cs.get(), per_channel, nullptr, dtype, m, inter, scale,
                                         nullptr));
  const kc::Fp8Rows in{d_x.get(), d_rs.get()}, out{codes.get(), scales.get()};
  GPU_CHECK(kc::GemmSwiGluFp8Supports(dtype, m, inter, k, in, d_w.get(), d_cs.get(), per_channel,
                                      scale, out),
            name + ": refused");
  CUDA_OK(kc::GemmSwiGluFp8(out, scale, in, d_w.get(), d_cs.get(), per_channel, dtype, m, inter, k,
                            nullptr));
  const CodesAndScales fused = Fetch(codes, scales), ref = Fetch(ref_codes, ref_scales);
  std::size_t differ = 0, far = 0, nonzero = 0;
  for (std::size_t i = 0; i < fused.codes.size(); ++i) {
    differ += fused.codes[i] != ref.codes[i];
    far += !OneStepApart(fused.codes[i], ref.codes[i]);
    nonzero += (fused.codes[i] & 0x7f) != 0;
  }
  const bool scales_equal = fused.scales == ref.scales;
  std::printf("  %-58s %zu of %zu codes differ from the two passes (%zu by more than a step)\n",
              name.c_str(), differ, fused.codes.size(), far);
  GPU_CHECK(far == 0 && differ * 200 <= fused.codes.size() && scales_equal,
            name + ": fused and two-pass codes differ");
  GPU_CHECK(nonzero > fused.codes.size() / 2, name + ": most codes are zero");

  // The CPU on a few rows: the first, the last and some between.
  std::vector<float> got, want;
  for (int t : {0, m / 3, m / 2, m - 1}) {
    for (int i = 0; i < inter; ++i) {
      double g = 0.0, u = 0.0;
      for (std::size_t j = 0; j < K; ++j) {
        const double a = Fp8E4M3ToFloat(x[static_cast<std::size_t>(t) * K + j]);
        g += a * Fp8E4M3ToFloat(w[static_cast<std::size_t>(i) * K + j]);
        u += a * Fp8E4M3ToFloat(w[(I + static_cast<std::size_t>(i)) * K + j]);
      }
      const double rs = row_scales[static_cast<std::size_t>(t)];
      g *= rs * col_scales[per_channel ? static_cast<std::size_t>(i) : 0];
      u *= rs * col_scales[per_channel ? I + static_cast<std::size_t>(i) : 0];
      want.push_back(static_cast<float>(g / (1.0 + std::exp(-g)) * u));
      got.push_back(
          E4M3Value(fused.codes[static_cast<std::size_t>(t) * I + static_cast<std::size_t>(i)]) *
          scale);
    }
  }
  // E4M3's rounding: half a step is 2^-4 of the value (NMSE at most ~1.3e-3 for values spread
  // over a binade; below the smallest normal the step is absolute and smaller).
  const double nmse = Nmse(got, want);
  std::printf("  %-58s NMSE %.2e against the CPU on 4 rows\n", name.c_str(), nmse);
  GPU_CHECK(nmse < 3e-3, name + ": NMSE against the CPU " + std::to_string(nmse));
}

GPU_TEST(GemmSwiGluFp8EqualsCublasThenCodes) {
  if (!kc::GemmSwiGluFp8Supports(DType::kBFloat16, 1, 128, 64, {nullptr, nullptr}, nullptr, nullptr,
                                 false, 1.0f, {nullptr, nullptr}) &&
      !kc::CublasLtFp8Gemm::DeviceSupportsFp8()) {
    std::printf("  no FP8 device: skipped\n");
    return;
  }
  CheckGemmSwiGluFp8(DType::kBFloat16, 1, 128, 64, false);  // one k tile, half of it past k
  CheckGemmSwiGluFp8(DType::kBFloat16, 200, 256, 4096, false);
  CheckGemmSwiGluFp8(DType::kFloat16, 301, 384, 1040, true);  // k not a multiple of 128
  // Llama-3.1-8B's gate/up at a decode step's rows and past two row blocks of a cluster.
  CheckGemmSwiGluFp8(DType::kBFloat16, 1024, 14336, 4096, true);
  CheckGemmSwiGluFp8(DType::kBFloat16, 517, 14336, 4096, false);
  // What it does not take: refused, not run.
  DeviceArray<std::uint8_t> buf(1 << 16);
  DeviceArray<float> fl(1024);
  const kc::Fp8Rows rows{buf.get(), fl.get()};
  GPU_CHECK(!kc::GemmSwiGluFp8Supports(DType::kBFloat16, 8, 128, 64, rows, buf.get(), fl.get(),
                                       false, 0.0f, rows),
            "a dynamic (zero) output scale is not refused");
  GPU_CHECK(!kc::GemmSwiGluFp8Supports(DType::kBFloat16, 8, 136, 64, rows, buf.get(), fl.get(),
                                       false, 1.0f, rows),
            "inter 136 is not refused");
  GPU_CHECK(!kc::GemmSwiGluFp8Supports(DType::kBFloat16, 8, 128, 72, rows, buf.get(), fl.get(),
                                       false, 1.0f, rows),
            "k 72 is not refused");
}

}  // namespace
}  // namespace inflight::gpu_test
