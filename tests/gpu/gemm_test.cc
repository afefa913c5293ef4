// cuBLASLt dense layer against cpu::Linear (fp32 accumulation of the same rounded inputs).
#include <algorithm>
#include <cmath>
#include <string>

#include "gpu_test_util.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/gemm.h"

namespace inflight::gpu_test {
namespace {

void CheckLinear(kernels::cuda::CublasLtGemm& gemm, DType dtype, DType y_dtype, int m, int k, int n,
                 bool with_bias, int x_pad) {
  const std::string name = "linear " + Describe(dtype) + "->" + Describe(y_dtype) +
                           " m=" + std::to_string(m) + " k=" + std::to_string(k) +
                           " n=" + std::to_string(n) + (with_bias ? " +bias" : "") +
                           (x_pad > 0 ? " strided-x" : "");
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
  if (y_dtype == DType::kFloat32) {
    DeviceArray<float> d_y(y_n);
    const cublasStatus_t st = gemm.Linear(d_y.get(), y_dtype, n, d_x.get(), x_stride, d_w.get(),
                                          d_bias, dtype, m, n, k, nullptr);
    GPU_CHECK(st == CUBLAS_STATUS_SUCCESS,
              name + ": cublas status " + std::to_string(static_cast<int>(st)));
    found = d_y.Download();
  } else {
    DeviceArray<std::uint16_t> d_y(y_n);
    const cublasStatus_t st = gemm.Linear(d_y.get(), y_dtype, n, d_x.get(), x_stride, d_w.get(),
                                          d_bias, dtype, m, n, k, nullptr);
    GPU_CHECK(st == CUBLAS_STATUS_SUCCESS,
              name + ": cublas status " + std::to_string(static_cast<int>(st)));
    found = FromBits(y_dtype, d_y.Download());
  }
  std::vector<float> ref(y_n);
  kernels::cpu::Linear(ref.data(), x.data(), x_stride, kernels::cpu::WeightPtr(w.data()),
                       with_bias ? kernels::cpu::WeightPtr(bias.data()) : kernels::cpu::WeightPtr(),
                       m, k, n, nullptr);
  // fp32 accumulation in a different order: ~sqrt(k) fp32 roundings of O(1) partial sums; then one
  // rounding to y_dtype.
  float acc_tol = 1e-5f * std::sqrt(static_cast<float>(k)) * 4;
  if (with_bias && y_dtype != DType::kFloat32) {
    // cuBLASLt's bias epilogue with a 16-bit output rounds the product to y_dtype before adding the
    // bias (seen on H100/H200): one more rounding of a term as large as the largest |x·w|.
    float max_product = 0.0f;
    for (std::size_t i = 0; i < y_n; ++i)
      max_product =
          std::max(max_product, std::fabs(ref[i] - bias[i % static_cast<std::size_t>(n)]));
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
    }
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
