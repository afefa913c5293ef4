// SwiGLU, gelu_new, the embedding gather and the calibration's amax fold against the CPU
// references.
#include <bit>
#include <cmath>
#include <string>

#include "gpu_test_util.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/amax.h"
#include "kernels/cuda/embedding.h"
#include "model/activation_amax.h"

namespace inflight::gpu_test {
namespace {

void CheckSwiGlu(DType dtype, int tokens, int inter) {
  const std::size_t n = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(inter);
  const auto gate_up = RoundTo(dtype, RandomVector(2 * n, -6.0f, 6.0f));
  DeviceArray<std::uint16_t> d_in(ToBits(dtype, gate_up)), d_out(n);
  CUDA_OK(kernels::cuda::SwiGlu(d_out.get(), d_in.get(), dtype, tokens, inter, nullptr));
  std::vector<float> ref(n);
  kernels::cpu::SwiGlu(ref.data(), gate_up.data(), tokens, inter);
  ExpectClose("swiglu " + Describe(dtype) + " tokens=" + std::to_string(tokens) +
                  " inter=" + std::to_string(inter),
              FromBits(dtype, d_out.Download()), ref, 1e-6f, Epsilon(dtype));
}

// inter 111 and 1025 take the scalar kernel, 1024 and 1032 the 16-byte one; 70000 tokens of 8 run
// past the vector kernel's 65535 grid rows.
GPU_TEST(SwiGluMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int tokens : {1, 3, 19, 99, 989})
      for (int inter : {111, 1024, 1025, 1032}) CheckSwiGlu(dtype, tokens, inter);
    CheckSwiGlu(dtype, 70000, 8);
  }
}

GPU_TEST(GeluNewMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (int n : {1, 3, 19, 99 * 111, 989 * 1025}) {
      const auto x = RoundTo(dtype, RandomVector(static_cast<std::size_t>(n), -8.0f, 8.0f));
      DeviceArray<std::uint16_t> d_x(ToBits(dtype, x)), d_out(static_cast<std::size_t>(n));
      CUDA_OK(kernels::cuda::GeluNew(d_out.get(), d_x.get(), dtype, n, nullptr));
      std::vector<float> ref(static_cast<std::size_t>(n));
      kernels::cpu::GeluNew(ref.data(), x.data(), n);
      ExpectClose("gelu_new " + Describe(dtype) + " n=" + std::to_string(n),
                  FromBits(dtype, d_out.Download()), ref, 1e-6f, Epsilon(dtype));
    }
}

// FoldAbsMax against ActivationAmax::Observe on the same rounded values: a strided column block
// (K in a fused qkv row), two folds into one slot (the larger wins), and a NaN that stays.
GPU_TEST(FoldAbsMaxMatchesCpu) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const int rows : {1, 7, 1500}) {
      const int stride = 768, cols = 130, offset = 512;  // a 130-wide block at column 512
      auto x = RoundTo(dtype, RandomVector(static_cast<std::size_t>(rows) * stride, -3.0f, 3.0f));
      const auto y = RoundTo(dtype, RandomVector(static_cast<std::size_t>(rows) * stride, -5, 5));
      DeviceArray<std::uint16_t> d_x(ToBits(dtype, x)), d_y(ToBits(dtype, y));
      DeviceArray<unsigned> d_amax(std::vector<unsigned>(1, 0u));
      model::ActivationAmax host;
      host.layers.assign(1, {});
      const std::string what = "fold abs max " + Describe(dtype) + " rows=" + std::to_string(rows);
      for (const std::vector<float>* v : {static_cast<const std::vector<float>*>(&x), &y}) {
        const auto& d = v == &x ? d_x : d_y;
        CUDA_OK(kernels::cuda::FoldAbsMax(d_amax.get(), d.get() + offset, rows, cols, stride, dtype,
                                          nullptr));
        host.Observe(0, model::AmaxPoint::kKey, v->data() + offset, rows, cols, stride);
      }
      const float found = std::bit_cast<float>(d_amax.Download()[0]);
      const float want = host.at(0, model::AmaxPoint::kKey);
      if (found != want) {
        Fail(what + ": " + std::to_string(found) + ", expected " + std::to_string(want));
      }
      x[static_cast<std::size_t>(rows - 1) * stride + offset + cols - 1] = std::nanf("");
      DeviceArray<std::uint16_t> d_nan(ToBits(dtype, x));
      CUDA_OK(kernels::cuda::FoldAbsMax(d_amax.get(), d_nan.get() + offset, rows, cols, stride,
                                        dtype, nullptr));
      if (!std::isnan(std::bit_cast<float>(d_amax.Download()[0]))) Fail(what + ": NaN not kept");
    }
  }
}

GPU_TEST(EmbeddingGatherMatchesCpu) {
  const int vocab = 1000, max_pos = 2048;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (int tokens : {1, 3, 19, 99, 989})
      for (int hidden : {111, 1025})
        for (bool learned_positions : {false, true}) {
          const auto table =
              RoundTo(dtype, RandomVector(static_cast<std::size_t>(vocab * hidden), -1, 1));
          const auto pos_table =
              RoundTo(dtype, RandomVector(static_cast<std::size_t>(max_pos * hidden), -1, 1));
          std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens)), positions(ids.size());
          std::uniform_int_distribution<int> id_dist(0, vocab - 1), pos_dist(0, max_pos - 1);
          for (auto& id : ids) id = id_dist(Rng());
          for (auto& p : positions) p = pos_dist(Rng());
          DeviceArray<std::uint16_t> d_table(ToBits(dtype, table)), d_pos(ToBits(dtype, pos_table)),
              d_out(static_cast<std::size_t>(tokens * hidden));
          DeviceArray<std::int32_t> d_ids(ids), d_positions(positions);
          CUDA_OK(kernels::cuda::EmbeddingGather(d_out.get(), d_ids.get(), tokens, d_table.get(),
                                                 hidden, learned_positions ? d_pos.get() : nullptr,
                                                 d_positions.get(), dtype, nullptr));
          std::vector<float> ref(static_cast<std::size_t>(tokens * hidden));
          kernels::cpu::EmbeddingGather(
              ref.data(), ids.data(), tokens, kernels::cpu::WeightPtr(table.data()), hidden,
              learned_positions ? kernels::cpu::WeightPtr(pos_table.data())
                                : kernels::cpu::WeightPtr(),
              positions.data());
          ExpectClose("embedding " + Describe(dtype) + " tokens=" + std::to_string(tokens) +
                          " hidden=" + std::to_string(hidden) +
                          (learned_positions ? " +positions" : ""),
                      FromBits(dtype, d_out.Download()), ref, 0.0f,
                      learned_positions ? Epsilon(dtype) : 0.0f);
        }
}

}  // namespace
}  // namespace inflight::gpu_test
