// Dense layers (cuBLASLt, the small-m weight-streaming kernels of gemv.h, and the Hopper gate/up
// kernel with SwiGLU in its epilogue) against cpu::Linear: fp32 accumulation of the same rounded
// inputs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "gpu_test_util.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_swiglu.h"
#include "kernels/cuda/gemv.h"

namespace inflight::gpu_test {
namespace {

// accumulate: LinearAdd onto a y of random values (y += x·Wᵀ (+ bias)) instead of Linear.
void CheckLinear(kernels::cuda::CublasLtGemm& gemm, DType dtype, DType y_dtype, int m, int k, int n,
                 bool with_bias, int x_pad, bool accumulate = false) {
  const std::string name = std::string(accumulate ? "linear-add " : "linear ") + Describe(dtype) +
                           "->" + Describe(y_dtype) + " m=" + std::to_string(m) +
                           " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                           (with_bias ? " +bias" : "") + (x_pad > 0 ? " strided-x" : "");
  const int x_stride = k + x_pad;
  const auto x = RoundTo(dtype, RandomVector(static_cast<std::size_t>(m) * x_stride, -1, 1));
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(k));
  const auto w = RoundTo(dtype, RandomVector(static_cast<std::size_t>(n) * k, -w_scale, w_scale));
  auto bias = RandomVector(static_cast<std::size_t>(n), -1, 1);
  if (y_dtype != DType::kFloat32) bias = RoundTo(y_dtype, bias);
  DeviceArray<std::uint16_t> d_x(ToBits(dtype, x)), d_w(ToBits(dtype, w));
  DeviceArray<std::uint16_t> d_bias16(ToBits(dtype, bias));
  DeviceArray<float> d_bias32(bias);
  const void* d_bias = !with_bias                   ? nullptr
                       : y_dtype == DType::kFloat32 ? static_cast<const void*>(d_bias32.get())
                                                    : static_cast<const void*>(d_bias16.get());
  std::vector<float> found;
  const std::size_t y_n = static_cast<std::size_t>(m) * n;
  // The old y: random (a residual stream) when accumulating, NaN (never read) otherwise.
  std::vector<float> y0 = accumulate ? RoundTo(y_dtype, RandomVector(y_n, -2, 2))
                                     : std::vector<float>(y_n, std::nanf(""));
  const auto run = [&](void* y) {
    return accumulate ? gemm.LinearAdd(y, y_dtype, n, d_x.get(), x_stride, d_w.get(), d_bias, dtype,
                                       m, n, k, nullptr)
                      : gemm.Linear(y, y_dtype, n, d_x.get(), x_stride, d_w.get(), d_bias, dtype, m,
                                    n, k, nullptr);
  };
  if (y_dtype == DType::kFloat32) {
    DeviceArray<float> d_y(y0);
    const cublasStatus_t st = run(d_y.get());
    GPU_CHECK(st == CUBLAS_STATUS_SUCCESS,
              name + ": cublas status " + std::to_string(static_cast<int>(st)));
    found = d_y.Download();
  } else {
    DeviceArray<std::uint16_t> d_y(ToBits(y_dtype, y0));
    const cublasStatus_t st = run(d_y.get());
    GPU_CHECK(st == CUBLAS_STATUS_SUCCESS,
              name + ": cublas status " + std::to_string(static_cast<int>(st)));
    found = FromBits(y_dtype, d_y.Download());
  }
  std::vector<float> ref(y_n);
  kernels::cpu::Linear(ref.data(), x.data(), x_stride, kernels::cpu::WeightPtr(w.data()),
                       with_bias ? kernels::cpu::WeightPtr(bias.data()) : kernels::cpu::WeightPtr(),
                       m, k, n, nullptr);
  if (accumulate) {
    for (std::size_t i = 0; i < y_n; ++i) ref[i] += y0[i];
  }
  // fp32 accumulation in a different order: ~sqrt(k) fp32 roundings of O(1) partial sums; then one
  // rounding to y_dtype.
  float acc_tol = 1e-5f * std::sqrt(static_cast<float>(k)) * 4;
  if ((with_bias || accumulate) && y_dtype != DType::kFloat32) {
    // cuBLASLt's bias epilogue with a 16-bit output rounds the product to y_dtype before adding the
    // bias (seen on H100/H200), and may do the same before adding the old y: one more rounding of
    // a term as large as the largest |x·w|.
    float max_product = 0.0f;
    for (std::size_t i = 0; i < y_n; ++i) {
      const float added =
          (with_bias ? bias[i % static_cast<std::size_t>(n)] : 0.0f) + (accumulate ? y0[i] : 0.0f);
      max_product = std::max(max_product, std::fabs(ref[i] - added));
    }
    acc_tol += Epsilon(y_dtype) * max_product;
  }
  ExpectClose(name, found, ref, acc_tol, Epsilon(y_dtype));
}

GPU_TEST(LinearMatchesCpu) {
  kernels::cuda::CublasLtGemm gemm;
  GPU_CHECK(gemm.status() == CUBLAS_STATUS_SUCCESS, "cuBLASLt init");
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (int m : {1, 3, 19, 99, 989}) {
      CheckLinear(gemm, dtype, dtype, m, 1024, 1025, false, 0);
      CheckLinear(gemm, dtype, dtype, m, 1024, 512, true, 0);
      CheckLinear(gemm, dtype, DType::kFloat32, m, 256, 1000, false, 0);
      CheckLinear(gemm, dtype, dtype, m, 111, 64, false, 0);  // odd k: unaligned rows
      CheckLinear(gemm, dtype, dtype, m, 1025, 111, true, 0);
      CheckLinear(gemm, dtype, dtype, m, 512, 256, false, 24);  // x rows inside a wider buffer
      CheckLinear(gemm, dtype, dtype, m, 1024, 1025, false, 0, true);
      CheckLinear(gemm, dtype, dtype, m, 1025, 111, true, 0, true);
      CheckLinear(gemm, dtype, DType::kFloat32, m, 256, 1000, true, 0, true);
    }
}

// Gemv directly (and GemvSwiGlu): every row count it takes, k with and without a partial last
// round of loads, n below one warp per block, fp32 logits, bias.
void CheckGemv(DType dtype, DType y_dtype, int m, int k, int n, bool with_bias, bool gated) {
  const std::string name = std::string(gated ? "gemv-swiglu " : "gemv ") + Describe(dtype) + "->" +
                           Describe(y_dtype) + " m=" + std::to_string(m) +
                           " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                           (with_bias ? " +bias" : "");
  const int rows = gated ? 2 * n : n;  // weight rows
  const auto x = RoundTo(dtype, RandomVector(static_cast<std::size_t>(m) * k, -1, 1));
  const float w_scale = 2.0f / std::sqrt(static_cast<float>(k));
  const auto w =
      RoundTo(dtype, RandomVector(static_cast<std::size_t>(rows) * k, -w_scale, w_scale));
  auto bias = RandomVector(static_cast<std::size_t>(rows), -1, 1);
  if (y_dtype != DType::kFloat32) bias = RoundTo(y_dtype, bias);
  DeviceArray<std::uint16_t> d_x(ToBits(dtype, x)), d_w(ToBits(dtype, w)),
      d_bias16(ToBits(dtype, bias));
  DeviceArray<float> d_bias32(bias);
  const void* d_bias = !with_bias                   ? nullptr
                       : y_dtype == DType::kFloat32 ? static_cast<const void*>(d_bias32.get())
                                                    : static_cast<const void*>(d_bias16.get());
  const std::size_t y_n = static_cast<std::size_t>(m) * n;
  std::vector<float> found;
  cudaError_t err = cudaSuccess;
  if (y_dtype == DType::kFloat32) {
    DeviceArray<float> d_y(std::vector<float>(y_n, std::nanf("")));
    err = kernels::cuda::Gemv(d_y.get(), y_dtype, n, d_x.get(), k, d_w.get(), d_bias, dtype, m, n,
                              k, false, nullptr);
    found = d_y.Download();
  } else {
    DeviceArray<std::uint16_t> d_y(std::vector<std::uint16_t>(y_n, NanBits(y_dtype)));
    err = gated ? kernels::cuda::GemvSwiGlu(d_y.get(), n, d_x.get(), k, d_w.get(), d_bias, dtype, m,
                                            n, k, nullptr)
                : kernels::cuda::Gemv(d_y.get(), y_dtype, n, d_x.get(), k, d_w.get(), d_bias, dtype,
                                      m, n, k, false, nullptr);
    found = FromBits(y_dtype, d_y.Download());
  }
  GPU_CHECK(err == cudaSuccess, name + ": " + cudaGetErrorString(err));
  std::vector<float> full(static_cast<std::size_t>(m) * rows);
  kernels::cpu::Linear(full.data(), x.data(), k, kernels::cpu::WeightPtr(w.data()),
                       with_bias ? kernels::cpu::WeightPtr(bias.data()) : kernels::cpu::WeightPtr(),
                       m, k, rows, nullptr);
  std::vector<float> ref(y_n);
  for (int t = 0; t < m; ++t)
    for (int o = 0; o < n; ++o) {
      const std::size_t at = static_cast<std::size_t>(t) * rows;
      const float g = full[at + static_cast<std::size_t>(o)];
      ref[static_cast<std::size_t>(t) * n + static_cast<std::size_t>(o)] =
          gated ? g / (1.0f + std::exp(-g)) * full[at + static_cast<std::size_t>(n + o)] : g;
    }
  // Products of O(1) terms summed in another order in fp32, then one rounding to y_dtype; the gate
  // multiplies two such sums (|silu(g)| <= |g| + 0.28).
  const float acc_tol = 1e-5f * std::sqrt(static_cast<float>(k)) * (gated ? 16 : 4);
  ExpectClose(name, found, ref, acc_tol, Epsilon(y_dtype));
}

GPU_TEST(GemvMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (int m = 1; m <= static_cast<int>(kernels::cuda::kGemvMaxRows); ++m) {
      CheckGemv(dtype, dtype, m, 8, 3, false, false);
      CheckGemv(dtype, dtype, m, 24, 129, true, false);
      CheckGemv(dtype, dtype, m, 1024, 1000, false, false);
      CheckGemv(dtype, dtype, m, 4104, 77, true, false);  // a partial last round of loads
      CheckGemv(dtype, DType::kFloat32, m, 256, 1001, false, false);
      CheckGemv(dtype, DType::kFloat32, m, 512, 9, true, false);
      CheckGemv(dtype, dtype, m, 14336, 40, false, false);
      CheckGemv(dtype, dtype, m, 8, 5, false, true);
      CheckGemv(dtype, dtype, m, 1040, 333, true, true);
      CheckGemv(dtype, dtype, m, 4096, 1024, false, true);
      CheckGemv(dtype, dtype, m, 32768, 40, true, false);  // x past the default 48 KiB of shared
    }
}

GPU_TEST(GemvRefusesWhatItCannotTake) {
  DeviceArray<std::uint16_t> buf(std::vector<std::uint16_t>(4096, 0));
  const void* p = buf.get();
  const auto* odd = static_cast<const unsigned char*>(p) + 2;  // 2-byte, not 16-byte, aligned
  const DType bf16 = DType::kBFloat16;
  GPU_CHECK(kernels::cuda::GemvSupports(bf16, 1, 64, 64, p, p), "m=1 k=64 should be taken");
  GPU_CHECK(!kernels::cuda::GemvSupports(bf16, kernels::cuda::kGemvMaxRows + 1, 64, 64, p, p),
            "more rows than kGemvMaxRows taken");
  GPU_CHECK(!kernels::cuda::GemvSupports(bf16, 1, 60, 60, p, p), "k=60 taken");
  GPU_CHECK(!kernels::cuda::GemvSupports(bf16, 1, 64, 68, p, p), "x_stride=68 taken");
  GPU_CHECK(!kernels::cuda::GemvSupports(bf16, 1, 64, 64, odd, p), "unaligned x taken");
  GPU_CHECK(!kernels::cuda::GemvSupports(DType::kFloat32, 1, 64, 64, p, p), "fp32 taken");
  const cudaError_t err =
      kernels::cuda::Gemv(buf.get(), bf16, 8, odd, 64, p, nullptr, bf16, 1, 8, 64, false, nullptr);
  GPU_CHECK(err == cudaErrorNotSupported,
            std::string("unaligned Gemv returned ") + cudaGetErrorString(err));
}

// GemmSwiGlu: rows and k past a whole tile (the tensor copies' zero fill), x and out inside wider
// rows, more tiles than SMs (CTAs taking several, row groups cut short). Every element outside
// [m, inter] of the output buffer starts NaN and must stay so.
void CheckGemmSwiGlu(DType dtype, int m, int inter, int k, int x_pad, int out_pad) {
  const std::string name = "gemm-swiglu " + Describe(dtype) + " m=" + std::to_string(m) +
                           " inter=" + std::to_string(inter) + " k=" + std::to_string(k) +
                           (x_pad > 0 ? " strided-x" : "") + (out_pad > 0 ? " strided-out" : "");
  const int x_stride = k + x_pad, out_stride = inter + out_pad;
  const auto x = RoundTo(dtype, RandomVector(static_cast<std::size_t>(m) * x_stride, -1, 1));
  const float w_scale = 2.0f / std::sqrt(static_cast<float>(k));
  const auto w =
      RoundTo(dtype, RandomVector(static_cast<std::size_t>(2 * inter) * k, -w_scale, w_scale));
  DeviceArray<std::uint16_t> d_x(ToBits(dtype, x)), d_w(ToBits(dtype, w));
  const std::size_t out_n = static_cast<std::size_t>(m + 1) * out_stride;  // one row past m
  DeviceArray<std::uint16_t> d_out(std::vector<std::uint16_t>(out_n, NanBits(dtype)));
  if (!kernels::cuda::GemmSwiGluSupports(dtype, m, inter, k, d_x.get(), x_stride, d_w.get(),
                                         d_out.get(), out_stride)) {
    std::printf("  %s: skipped (no sm_90a code for this device)\n", name.c_str());
    return;
  }
  const cudaError_t err = kernels::cuda::GemmSwiGlu(d_out.get(), out_stride, d_x.get(), x_stride,
                                                    d_w.get(), dtype, m, inter, k, nullptr);
  GPU_CHECK(err == cudaSuccess, name + ": " + cudaGetErrorString(err));
  const auto out = FromBits(dtype, d_out.Download());
  std::vector<float> full(static_cast<std::size_t>(m) * 2 * inter);
  kernels::cpu::Linear(full.data(), x.data(), x_stride, kernels::cpu::WeightPtr(w.data()),
                       kernels::cpu::WeightPtr(), m, k, std::int64_t{2} * inter, nullptr);
  std::vector<float> found, ref;
  int stray = 0;
  for (int t = 0; t <= m; ++t)
    for (int o = 0; o < out_stride; ++o) {
      const float v = out[static_cast<std::size_t>(t) * out_stride + static_cast<std::size_t>(o)];
      if (t == m || o >= inter) {
        stray += std::isnan(v) ? 0 : 1;
        continue;
      }
      const std::size_t at = static_cast<std::size_t>(t) * 2 * inter + static_cast<std::size_t>(o);
      const float g = full[at];
      found.push_back(v);
      ref.push_back(g / (1.0f + std::exp(-g)) * full[at + static_cast<std::size_t>(inter)]);
    }
  GPU_CHECK(stray == 0,
            name + ": " + std::to_string(stray) + " elements written outside [m, inter]");
  // Sums in another fp32 order as CheckGemv's gated case; then three roundings to dtype (g and u,
  // as the separate path's gate_up output, and the result), g's amplified by
  // |g silu'(g) / silu(g)| = |1 + g (1 - sigmoid(g))| <= 1 + |g| (|g| < 3.5 here): 3.5 eps.
  const float acc_tol = 1e-5f * std::sqrt(static_cast<float>(k)) * 16;
  ExpectClose(name, found, ref, acc_tol, 3.5f * Epsilon(dtype));
}

GPU_TEST(GemmSwiGluMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    CheckGemmSwiGlu(dtype, 1, 128, 64, 0, 0);
    CheckGemmSwiGlu(dtype, 77, 256, 200, 0, 0);  // k past the last whole 64-column slice
    CheckGemmSwiGlu(dtype, 128, 128, 512, 0, 0);
    CheckGemmSwiGlu(dtype, 300, 384, 1024, 24, 8);
    CheckGemmSwiGlu(dtype, 2100, 1024, 136, 0, 0);  // 136 tiles; 17 row blocks: a group of 1
  }
}

GPU_TEST(GemmSwiGluRefusesWhatItCannotTake) {
  DeviceArray<std::uint16_t> buf(std::vector<std::uint16_t>(1 << 16, 0));
  const void* p = buf.get();
  const auto* odd = static_cast<const unsigned char*>(p) + 2;
  const DType bf16 = DType::kBFloat16;
  namespace kc = kernels::cuda;
  if (!kc::GemmSwiGluSupports(bf16, 1, 128, 64, p, 64, p, p, 128)) {
    std::printf("  GemmSwiGlu: skipped (no sm_90a code for this device)\n");
    return;
  }
  GPU_CHECK(!kc::GemmSwiGluSupports(bf16, 1, 100, 64, p, 64, p, p, 128), "inter=100 taken");
  GPU_CHECK(!kc::GemmSwiGluSupports(bf16, 1, 128, 60, p, 60, p, p, 128), "k=60 taken");
  GPU_CHECK(!kc::GemmSwiGluSupports(bf16, 1, 128, 64, p, 68, p, p, 128), "x_stride=68 taken");
  GPU_CHECK(!kc::GemmSwiGluSupports(bf16, 1, 128, 64, odd, 64, p, p, 128), "unaligned x taken");
  GPU_CHECK(!kc::GemmSwiGluSupports(bf16, 1, 128, 64, p, 64, p, p, 132), "out_stride=132 taken");
  GPU_CHECK(!kc::GemmSwiGluSupports(bf16, 1, 128, 64, p, 64, p, odd, 128), "unaligned out taken");
  GPU_CHECK(!kc::GemmSwiGluSupports(bf16, 0, 128, 64, p, 64, p, p, 128), "m=0 taken");
  GPU_CHECK(!kc::GemmSwiGluSupports(DType::kFloat32, 1, 128, 64, p, 64, p, p, 128), "fp32 taken");
  const cudaError_t err = kc::GemmSwiGlu(buf.get(), 128, odd, 64, p, bf16, 1, 128, 64, nullptr);
  GPU_CHECK(err == cudaErrorNotSupported,
            std::string("unaligned GemmSwiGlu returned ") + cudaGetErrorString(err));
}

GPU_TEST(LinearCachesOnePlanPerShape) {
  kernels::cuda::CublasLtGemm gemm;
  GPU_CHECK(gemm.status() == CUBLAS_STATUS_SUCCESS, "cuBLASLt init");
  CheckLinear(gemm, DType::kBFloat16, DType::kBFloat16, 19, 256, 512, false, 0);
  const std::size_t after_first = gemm.num_cached_plans();
  CheckLinear(gemm, DType::kBFloat16, DType::kBFloat16, 19, 256, 512, false, 0);
  GPU_CHECK(gemm.num_cached_plans() == after_first,
            "same shape made a new plan: " + std::to_string(gemm.num_cached_plans()));
  CheckLinear(gemm, DType::kBFloat16, DType::kBFloat16, 20, 256, 512, false, 0);
  GPU_CHECK(gemm.num_cached_plans() == after_first + 1,
            "new shape did not add one plan: " + std::to_string(gemm.num_cached_plans()));
}

}  // namespace
}  // namespace inflight::gpu_test
