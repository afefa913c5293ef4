// inflight-bench-gpu-kernels' sampling section (gpu_kernels_bench.h): the runner's greedy path
// (SampleRows with greedy parameters), ArgMax, and top-k / top-p sampling over 128256 fp32 logits a
// row, GB/s of logits read.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "gpu_bench_util.h"
#include "gpu_kernels_bench.h"
#include "gpu_llama_shape.h"
#include "kernels/cuda/sampling.h"
#include "table.h"

namespace inflight::bench::gpu::kernel_bench {

namespace kc = kernels::cuda;

void Sampling(const Options& opt, const Ceilings& c, cudaStream_t stream) {
  std::cout << "## Sampling over a 128256 vocabulary (fp32 logits uniform in [-8, 8))\n\nGB/s = "
               "batch x 128256 x 4 bytes of logits read / median. Copy ceiling this run: "
            << Fmt(c.copy.copy_gbps(), 1) << " GB/s; read-only stream: " << Fmt(c.copy.read_gbps, 1)
            << " GB/s.\n\n";
  Table t({"op", "batch", "logits read", "median", "p10..p90", "GB/s", "% of copy",
           "% of read-only", "sets"});
  struct Variant {
    const char* name;
    bool argmax;
    float temperature;
    std::int32_t top_k;
    float top_p;
    bool sample_rows = false;  // SampleRows with greedy params: the runner's greedy decode path
  };
  const std::vector<Variant> variants = {{"argmax", true, 0.0f, 0, 1.0f},
                                         {"SampleRows greedy", true, 0.0f, 0, 1.0f, true},
                                         {"top-k 50, top-p 0.9, T 0.8", false, 0.8f, 50, 0.9f},
                                         {"top-p 0.9 (no top-k), T 0.8", false, 0.8f, 0, 0.9f},
                                         {"full vocabulary, T 1", false, 1.0f, 0, 1.0f}};
  const std::vector<std::int64_t> batches = {1, 8, 64, 256};
  for (const Variant& var : variants) {
    for (std::int64_t B : batches) {
      const auto set_bytes = static_cast<std::size_t>(B * kVocab * 4);
      const int sets = Rotations(set_bytes, c.device.l2_bytes, std::size_t{2} << 30);
      std::vector<DeviceBuffer> logits;
      for (int i = 0; i < sets; ++i) {
        logits.emplace_back(set_bytes);
        FillUniform(logits.back().get(), DType::kFloat32, static_cast<std::size_t>(B * kVocab),
                    -8.0f, 8.0f, 800 + i, stream);
      }
      const std::vector<float> temperature(static_cast<std::size_t>(B), var.temperature);
      const std::vector<std::int32_t> top_k(static_cast<std::size_t>(B), var.top_k);
      const std::vector<float> top_p(static_cast<std::size_t>(B), var.top_p);
      std::vector<float> uniform(static_cast<std::size_t>(B));
      for (std::size_t r = 0; r < uniform.size(); ++r) {
        uniform[r] = static_cast<float>((r * 0.6180339887) - std::floor(r * 0.6180339887));
      }
      DeviceBuffer d_temp(temperature.size() * 4), d_k(top_k.size() * 4), d_p(top_p.size() * 4),
          d_u(uniform.size() * 4), d_ids(static_cast<std::size_t>(B) * 4),
          d_log_probs(static_cast<std::size_t>(B) * 4),
          d_params(static_cast<std::size_t>(B) * sizeof(kc::SamplingParams)), d_lists(4);
      kc::SamplingParams greedy;
      greedy.greedy = 1;
      const std::vector<kc::SamplingParams> params(static_cast<std::size_t>(B), greedy);
      BENCH_CUDA(
          cudaMemcpy(d_params.get(), params.data(), d_params.bytes(), cudaMemcpyHostToDevice));
      BENCH_CUDA(cudaMemset(d_lists.get(), 0, d_lists.bytes()));
      BENCH_CUDA(
          cudaMemcpy(d_temp.get(), temperature.data(), d_temp.bytes(), cudaMemcpyHostToDevice));
      BENCH_CUDA(cudaMemcpy(d_k.get(), top_k.data(), d_k.bytes(), cudaMemcpyHostToDevice));
      BENCH_CUDA(cudaMemcpy(d_p.get(), top_p.data(), d_p.bytes(), cudaMemcpyHostToDevice));
      BENCH_CUDA(cudaMemcpy(d_u.get(), uniform.data(), d_u.bytes(), cudaMemcpyHostToDevice));
      TimingOptions to;
      to.budget_ms = opt.budget_ms;
      to.rotations = sets;
      const Timing tm = TimeCalls(
          [&](int call) {
            float* l = logits[call % sets].get<float>();
            if (var.sample_rows) {
              return kc::SampleRows(d_ids.get<std::int32_t>(), d_log_probs.get<float>(), l, B,
                                    kVocab, kVocab, d_params.get<kc::SamplingParams>(),
                                    d_lists.get<std::int32_t>(), stream);
            }
            if (var.argmax)
              return kc::ArgMax(d_ids.get<std::int32_t>(), l, B, kVocab, kVocab, stream);
            return kc::SampleTopKTopP(d_ids.get<std::int32_t>(), l, B, kVocab, kVocab,
                                      d_temp.get<float>(), d_k.get<std::int32_t>(),
                                      d_p.get<float>(), d_u.get<float>(), stream);
          },
          stream, to);
      const double bytes = static_cast<double>(set_bytes);
      const double gbps = bytes / (tm.median_us * 1e3);
      t.AddRow({var.name, std::to_string(B), Mb(bytes) + " MB", FmtUs(tm.median_us), Range(tm),
                Fmt(gbps, 1), Percent(gbps, c.copy.copy_gbps()), Percent(gbps, c.copy.read_gbps),
                std::to_string(sets)});
    }
  }
  t.Print(std::cout);
  std::cout << "\n";
}

}  // namespace inflight::bench::gpu::kernel_bench
