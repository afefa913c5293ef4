// inflight-bench-gpu-kernels, section "mlp-fp8": the FP8 (W8A8) MLP's gate/up layer from the norm's
// E4M3 codes to the down linear's codes, as a calibrated engine runs it (one weight scale, static
// input scales): cuBLASLt's FP8 GEMM to unscaled bf16 products [T, 28672] in 2,048-row chunks (the
// runner's kQuantFp8ChunkRows) then the SwiGLU codes pass (the separate path), against
// kernels/cuda/gemm_swiglu_fp8.h (one kernel). Each INFLIGHT_FP8_FAST_ACCUM setting is a run of its
// own: the cuBLASLt plans read it once.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "common/env_switch.h"
#include "gpu_kernels_bench.h"
#include "gpu_llama_shape.h"
#include "kernels/cuda/fp8_activation_producers.h"
#include "kernels/cuda/gemm_swiglu_fp8.h"
#include "kernels/cuda/quant_gemm_fp8.h"
#include "kernels/cuda/quant_linear_path.h"

namespace inflight::bench::gpu::kernel_bench {
namespace {

namespace kc = kernels::cuda;

// n random E4M3 codes of magnitude below 2^5 (exponent fields 0-11; no NaN), on the device.
DeviceBuffer RandomCodes(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> host(n);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t r = rng();
    for (std::size_t j = i; j < std::min(n, i + 8); ++j, r >>= 8) {
      host[j] = static_cast<std::uint8_t>((r & 0x80) | ((r & 0x7f) % 0x60));
    }
  }
  DeviceBuffer d(n);
  BENCH_CUDA(cudaMemcpy(d.get(), host.data(), n, cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

void MlpFp8(const Options& opt, const Ceilings& c, cudaStream_t stream) {
  std::cout << "## The FP8 MLP's gate/up layer, SwiGLU and the down linear's codes (E4M3, hidden "
               "4096 -> 2 x 14336 -> 14336 codes)\n\nTFLOP/s = 2 x tokens x 28672 x 4096 / median "
               "(cuBLASLt's bf16 8192^3 rate this run: "
            << Fmt(c.gemm_tflops, 1)
            << "). separate: CublasLtFp8Gemm::Multiply to bf16 [T, 28672] by 2,048-row chunks, "
               "then Fp8GemmSwiGluEpilogueCodes; fused: kernels/cuda/gemm_swiglu_fp8.h. cuBLASLt "
               "fast accumulation: "
            << (EnvSwitchOn("INFLIGHT_FP8_FAST_ACCUM") ? "on" : "off") << ".\n\n";
  kc::CublasLtFp8Gemm gemm;
  if (gemm.status() != CUBLAS_STATUS_SUCCESS) {
    Die(__FILE__, __LINE__, "CublasLtFp8Gemm()", CublasStatusName(gemm.status()));
  }
  Table t(kPairColumns);
  const auto w_bytes = static_cast<std::size_t>(2 * kInter * kHidden);
  DeviceBuffer w_scale(4),
      chunk_raw(static_cast<std::size_t>(kc::kQuantFp8ChunkRows * 2 * kInter * 2));
  FillUniform(w_scale.get(), DType::kFloat32, 1, 1e-3f, 2e-3f, 810, stream);
  const float out_scale = 0.05f;
  for (std::int64_t T : opt.mlp_tokens) {
    const auto rows = static_cast<std::size_t>(T);
    const auto x_bytes = rows * kHidden, out_bytes = rows * kInter;
    const int sets = Rotations(x_bytes + w_bytes + out_bytes, c.device.l2_bytes,
                               std::min<std::size_t>(FreeBytes() / 2, std::size_t{4} << 30));
    std::vector<DeviceBuffer> xs, x_scales, ws, outs, out_scales;
    for (int i = 0; i < sets; ++i) {
      xs.push_back(RandomCodes(x_bytes, 820 + static_cast<std::uint64_t>(i)));
      ws.push_back(RandomCodes(w_bytes, 840 + static_cast<std::uint64_t>(i)));
      x_scales.emplace_back(rows * 4);
      FillUniform(x_scales.back().get(), DType::kFloat32, rows, 1e-3f, 2e-3f, 860 + i, stream);
      outs.emplace_back(out_bytes);
      out_scales.emplace_back(rows * 4);
    }
    const auto in = [&](int i) {
      return kc::Fp8Rows{xs[i].get<std::uint8_t>(), x_scales[i].get<float>()};
    };
    const auto out = [&](int i) {
      return kc::Fp8Rows{outs[i].get<std::uint8_t>(), out_scales[i].get<float>()};
    };
    if (!kc::GemmSwiGluFp8Supports(kDType, T, kInter, kHidden, in(0), ws[0].get<std::uint8_t>(),
                                   w_scale.get<float>(), false, out_scale, out(0))) {
      std::cout << "(fused kernel not available on this device: no sm_90a code)\n\n";
      return;
    }
    AddSeparateAndFusedRows(
        t, opt, c, T, sets, 2.0 * static_cast<double>(T) * 2 * kInter * kHidden,
        [&](int i) {
          for (std::int64_t t0 = 0; t0 < T; t0 += kc::kQuantFp8ChunkRows) {
            const std::int64_t mt = std::min(kc::kQuantFp8ChunkRows, T - t0);
            if (gemm.Multiply(chunk_raw.get(), xs[i].get<std::uint8_t>() + t0 * kHidden,
                              ws[i].get<std::uint8_t>(), mt, 2 * kInter, kHidden,
                              stream) != CUBLAS_STATUS_SUCCESS) {
              return cudaErrorUnknown;
            }
            const cudaError_t err = kc::Fp8GemmSwiGluEpilogueCodes(
                {out(i).codes + t0 * kInter, out(i).row_scales + t0}, chunk_raw.get(),
                in(i).row_scales + t0, w_scale.get<float>(), false, nullptr, kDType, mt, kInter,
                out_scale, stream);
            if (err != cudaSuccess) return err;
          }
          return cudaSuccess;
        },
        [&](int i) {
          return kc::GemmSwiGluFp8(out(i), out_scale, in(i), ws[i].get<std::uint8_t>(),
                                   w_scale.get<float>(), false, kDType, T, kInter, kHidden, stream);
        },
        stream);
  }
  t.Print(std::cout);
  std::cout << "\n";
}

}  // namespace inflight::bench::gpu::kernel_bench
