// inflight-bench-gpu-fp8-producers: the passes around an FP8 (W8A8) linear that are not GEMMs, at
// Llama-3.1-8B's shapes, each beside its memory floor (bytes read and written once, over the copy
// rate measured at the start of the run):
//
//   rmsnorm-codes   RMSNorm of [rows, 4096] straight to E4M3 codes and row scales (RmsNormQuantFp8)
//   rmsnorm-static  the same under a static input scale (a calibrated or ModelOpt engine's)
//   swiglu-codes    the gate/up GEMM's raw products [rows, 2 x 14336] through their scales and
//                   SwiGLU to the down linear's codes and row scales (Fp8GemmSwiGluEpilogueCodes)
//   epilogue        the raw products [rows, 4096] of attention-out / down through their scales,
//                   added to the residual (Fp8GemmEpilogue, accumulate)
//
// A decode step of 1,024 sequences runs each 32 to 64 times, a context step of 8,192 prompt tokens
// likewise: the kernel profile of 2026-11-30 put these passes at 13-16% of an FP8 step.
// Random inputs (the products are sums of code products: hundreds to thousands), rotated past L2.
//
//   inflight-bench-gpu-fp8-producers [--rows 1,64,1024,8192] [--passes LIST] [--budget_ms 200]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "gpu_bench_util.h"
#include "gpu_llama_shape.h"
#include "kernels/cuda/fp8_activation_producers.h"
#include "kernels/cuda/quant_gemm_fp8.h"
#include "table.h"

namespace inflight::bench::gpu {
namespace {

namespace kc = kernels::cuda;

struct Options {
  std::vector<std::int64_t> rows = {1, 64, 1024, 8192};
  std::set<std::string> passes = {"rmsnorm-codes", "rmsnorm-static", "swiglu-codes", "epilogue"};
  double budget_ms = 200;
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  tools::FlagSet flags("inflight-bench-gpu-fp8-producers",
                       "The FP8 linears' non-GEMM passes at Llama-3.1-8B shapes against their "
                       "memory floor.");
  flags.Add("rows", "LIST", "token rows (default 1,64,1024,8192)", [&](const std::string& v) {
    return tools::ParseIntList("--rows", v, 1, 16384, &o.rows);
  });
  flags.Add("passes", "LIST",
            "of rmsnorm-codes, rmsnorm-static, swiglu-codes, epilogue (default all)",
            [&](const std::string& v) {
              return tools::ParseChoiceSet(
                  "--passes", v, {"rmsnorm-codes", "rmsnorm-static", "swiglu-codes", "epilogue"},
                  &o.passes);
            });
  AddBudgetFlag(flags, &o.budget_ms);
  ParseFlagsOrExit(flags, argc, argv);
  return o;
}

// One input and output set of a pass: what a call reads and writes, rotated past L2.
struct PassSet {
  DeviceBuffer in, out_codes, out_scales, row_scales;
};

struct Pass {
  std::string name;
  std::int64_t in_elems_per_row, out_bytes_per_row;  // bf16 inputs; codes (1 B) or bf16 outputs
  bool writes_codes;
  // Enqueues the pass over `rows` rows of `set` on `stream`.
  std::function<cudaError_t(const PassSet& set, std::int64_t rows, cudaStream_t stream)> run;
};

int Run(const Options& opt) {
  cudaStream_t stream = nullptr;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const DeviceInfo device = QueryDevice();
  std::cout << "# FP8 activation producers and epilogues (llama-3.1-8b shapes, bf16)\n\nDevice: "
            << Describe(device) << "\n\n";
  const CopyCeiling copy = MeasureCopyCeiling(std::size_t{1} << 30, stream);
  std::cout << "Copy " << Fmt(copy.copy_gbps(), 1)
            << " GB/s (read + written) this run: floor = bytes read and written / that rate.\n\n";

  // What every row shares: the norm's weight, the gate/up and output linears' channel scales.
  DeviceBuffer norm_weight(kHidden * kBf16), gate_up_scales(2 * kInter * 4),
      out_scales(kHidden * 4);
  FillUniform(norm_weight.get(), kDType, kHidden, 0.5f, 1.5f, 11, stream);
  FillUniform(gate_up_scales.get(), DType::kFloat32, 2 * kInter, 5e-4f, 2e-3f, 12, stream);
  FillUniform(out_scales.get(), DType::kFloat32, kHidden, 5e-4f, 2e-3f, 13, stream);
  const std::vector<Pass> all = {
      {"rmsnorm-codes", kHidden, kHidden, true,
       [&](const PassSet& s, std::int64_t m, cudaStream_t st) {
         return kc::RmsNormQuantFp8({s.out_codes.get<std::uint8_t>(), s.out_scales.get<float>()},
                                    s.in.get(), norm_weight.get(), kDType, m, kHidden, 1e-5f, 0.0f,
                                    st);
       }},
      {"rmsnorm-static", kHidden, kHidden, true,
       [&](const PassSet& s, std::int64_t m, cudaStream_t st) {
         return kc::RmsNormQuantFp8({s.out_codes.get<std::uint8_t>(), s.out_scales.get<float>()},
                                    s.in.get(), norm_weight.get(), kDType, m, kHidden, 1e-5f,
                                    4.0f / 448.0f, st);
       }},
      {"swiglu-codes", 2 * kInter, kInter, true,
       [&](const PassSet& s, std::int64_t m, cudaStream_t st) {
         return kc::Fp8GemmSwiGluEpilogueCodes(
             {s.out_codes.get<std::uint8_t>(), s.out_scales.get<float>()}, s.in.get(),
             s.row_scales.get<float>(), gate_up_scales.get<float>(), true, nullptr, kDType, m,
             kInter, 0.0f, st);
       }},
      // The residual is read and written: counted as a read of 2 bytes and a write of 2 a column.
      {"epilogue", kHidden, 2 * kHidden * kBf16, false,
       [&](const PassSet& s, std::int64_t m, cudaStream_t st) {
         return kc::Fp8GemmEpilogue(s.out_codes.get(), kHidden, s.in.get(),
                                    s.row_scales.get<float>(), out_scales.get<float>(), true,
                                    nullptr, kDType, m, kHidden, true, st);
       }},
  };

  Table t({"pass", "rows", "median", "p10..p90", "bytes", "floor", "floor / median", "sets"});
  for (const Pass& p : all) {
    if (opt.passes.count(p.name) == 0) continue;
    for (const std::int64_t m : opt.rows) {
      const auto in_bytes = static_cast<std::size_t>(m * p.in_elems_per_row * kBf16);
      const auto out_bytes = static_cast<std::size_t>(m * p.out_bytes_per_row);
      const double bytes = static_cast<double>(in_bytes + out_bytes) +
                           static_cast<double>(m) * (p.writes_codes ? 8.0 : 4.0);
      const int sets = Rotations(static_cast<std::size_t>(bytes), device.l2_bytes,
                                 std::min<std::size_t>(FreeBytes() / 2, std::size_t{4} << 30));
      std::vector<PassSet> data(static_cast<std::size_t>(sets));
      for (int i = 0; i < sets; ++i) {
        PassSet& s = data[static_cast<std::size_t>(i)];
        s.in = DeviceBuffer(in_bytes);
        // Raw FP8 products are sums of k code products; a norm's input is the residual stream.
        const bool raw = p.name != "rmsnorm-codes";
        FillUniform(s.in.get(), kDType, in_bytes / kBf16, raw ? -3000.0f : -2.0f,
                    raw ? 3000.0f : 2.0f, 100 + static_cast<std::uint64_t>(i), stream);
        s.out_codes = DeviceBuffer(p.writes_codes ? out_bytes : out_bytes / 2);
        if (!p.writes_codes) {
          FillUniform(s.out_codes.get(), kDType, out_bytes / 2 / kBf16, -1.0f, 1.0f, 300, stream);
        }
        s.out_scales = DeviceBuffer(static_cast<std::size_t>(m) * 4);
        s.row_scales = DeviceBuffer(static_cast<std::size_t>(m) * 4);
        FillUniform(s.row_scales.get(), DType::kFloat32, static_cast<std::size_t>(m), 1e-3f, 1e-2f,
                    200 + static_cast<std::uint64_t>(i), stream);
      }
      TimingOptions to;
      to.budget_ms = opt.budget_ms;
      to.rotations = sets;
      const Timing tm = TimeCalls(
          [&](int call) { return p.run(data[static_cast<std::size_t>(call % sets)], m, stream); },
          stream, to);
      const double floor_us = bytes / (copy.copy_gbps() * 1e3);
      t.AddRow({p.name, std::to_string(m), FmtUs(tm.median_us), Range(tm),
                Fmt(bytes / 1e6, 2) + " MB", FmtUs(floor_us), Percent(floor_us, tm.median_us),
                std::to_string(sets)});
    }
  }
  t.Print(std::cout);
  std::cout << "\nbytes: the rows' inputs and outputs once each (the shared weights and scales are "
               "not counted: they stay in L2). Medians over CUDA-graph replays; \"sets\": input "
               "sets rotated past L2 ("
            << Fmt(static_cast<double>(device.l2_bytes) / 1048576.0, 0) << " MiB).\n";
  BENCH_CUDA(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace
}  // namespace inflight::bench::gpu

int main(int argc, char** argv) {
  const auto options = inflight::bench::gpu::ParseArgs(argc, argv);
  inflight::bench::gpu::ExitUnlessDeviceVisible("inflight-bench-gpu-fp8-producers");
  return inflight::bench::gpu::Run(options);
}
