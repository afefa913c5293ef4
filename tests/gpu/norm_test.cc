// RMSNorm and LayerNorm (with and without the fused residual add) against the CPU references.
#include <string>

#include "gpu_test_util.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/rmsnorm.h"

namespace inflight::gpu_test {
namespace {

enum class Norm { kRms, kLayer };

void CheckNorm(Norm norm, DType dtype, int tokens, int hidden, bool with_residual, bool with_bias) {
  const std::string name = std::string(norm == Norm::kRms ? "rmsnorm" : "layernorm") + " " +
                           Describe(dtype) + " tokens=" + std::to_string(tokens) +
                           " hidden=" + std::to_string(hidden) +
                           (with_residual ? " +residual" : "") + (with_bias ? " +bias" : "");
  const std::size_t n = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(hidden);
  const auto x = RoundTo(dtype, RandomVector(n, -2.0f, 2.0f));
  const auto residual = RoundTo(dtype, RandomVector(n, -2.0f, 2.0f));
  const auto weight = RoundTo(dtype, RandomVector(static_cast<std::size_t>(hidden), 0.5f, 1.5f));
  const auto bias = RoundTo(dtype, RandomVector(static_cast<std::size_t>(hidden), -0.5f, 0.5f));
  const float eps = 1e-5f;

  DeviceArray<std::uint16_t> d_x(ToBits(dtype, x)), d_res(ToBits(dtype, residual)),
      d_w(ToBits(dtype, weight)), d_b(ToBits(dtype, bias)), d_out(n);
  void* res_ptr = with_residual ? d_res.get() : nullptr;
  if (norm == Norm::kRms) {
    CUDA_OK(kernels::cuda::RmsNorm(d_out.get(), d_x.get(), res_ptr, d_w.get(), dtype, tokens,
                                   hidden, eps, nullptr));
  } else {
    CUDA_OK(kernels::cuda::LayerNorm(d_out.get(), d_x.get(), res_ptr, d_w.get(),
                                     with_bias ? d_b.get() : nullptr, dtype, tokens, hidden, eps,
                                     nullptr));
  }
  std::vector<float> ref_out(n), ref_res = residual;
  float* ref_res_ptr = with_residual ? ref_res.data() : nullptr;
  const kernels::cpu::WeightPtr w(weight.data()), b(with_bias ? bias.data() : nullptr);
  if (norm == Norm::kRms) {
    kernels::cpu::RmsNorm(ref_out.data(), x.data(), ref_res_ptr, w, tokens, hidden, eps);
  } else {
    kernels::cpu::LayerNorm(ref_out.data(), x.data(), ref_res_ptr, w, b, tokens, hidden, eps);
  }
  const float e = Epsilon(dtype);
  // The device rounds the residual sum to dtype before normalising: one more rounding of input.
  ExpectClose(name + " out", FromBits(dtype, d_out.Download()), ref_out, 2 * e, 3 * e);
  if (with_residual) {
    ExpectClose(name + " residual", FromBits(dtype, d_res.Download()), ref_res, 0.0f, e);
  }
}

GPU_TEST(RmsNormMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (int tokens : {1, 3, 19, 99})
      for (int hidden : {111, 1025, 4096, 8192, 8200})
        for (bool residual : {false, true})
          CheckNorm(Norm::kRms, dtype, tokens, hidden, residual, false);
}

GPU_TEST(LayerNormMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (int tokens : {1, 3, 19, 99})
      for (int hidden : {111, 1025, 4096})
        for (bool residual : {false, true})
          CheckNorm(Norm::kLayer, dtype, tokens, hidden, residual, hidden != 4096);
}

GPU_TEST(NormAliasedOutputMatchesCpu) {
  // out == x is allowed: the model runner normalises in place.
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const int tokens = 19, hidden = 1025;
    const std::size_t n = static_cast<std::size_t>(tokens * hidden);
    const auto x = RoundTo(dtype, RandomVector(n, -2.0f, 2.0f));
    const auto weight = RoundTo(dtype, RandomVector(static_cast<std::size_t>(hidden), 0.5f, 1.5f));
    DeviceArray<std::uint16_t> d_x(ToBits(dtype, x)), d_w(ToBits(dtype, weight));
    CUDA_OK(kernels::cuda::RmsNorm(d_x.get(), d_x.get(), nullptr, d_w.get(), dtype, tokens, hidden,
                                   1e-6f, nullptr));
    std::vector<float> ref(n);
    kernels::cpu::RmsNorm(ref.data(), x.data(), nullptr, kernels::cpu::WeightPtr(weight.data()),
                          tokens, hidden, 1e-6f);
    ExpectClose("rmsnorm in place " + Describe(dtype), FromBits(dtype, d_x.Download()), ref,
                Epsilon(dtype), 2 * Epsilon(dtype));
  }
}

}  // namespace
}  // namespace inflight::gpu_test
