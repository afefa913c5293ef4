// inflight-bench-gpu-quant: the quantized linears (kernels/cuda/quant_linear.h) at Llama-3-8B's
// linear shapes — 4096 x 4096 (attention output), 2 x 14336 x 4096 (gate/up), 4096 x 14336 (down)
// — beside the bf16 GEMM of the same shape, each time next to its memory floor: the bytes of its
// weights (codes, scales, zero points, g_idx) over the read-only stream rate measured at the start
// of the run. At 1 row a linear is a pass over its weights, so the floor is the target; at 64 rows
// the tensor cores start to matter and the floor is a bound, not a goal. Weight-only rows past the
// GEMV run the rule's path and, marked "(forced)", the other of the mixed GEMM and the dequantizing
// path, so where the rule switches between them can be read off one run.
//
//   fp8        E4M3 per output channel, activations per token (quantized in place each call)
//   fp8-static E4M3 per tensor, one static input scale (ModelOpt's and llm-compressor's FP8)
//   int8       per channel, no zero points (inflight-build --qformat int8_wo)
//   int4       groups of 128 with zero points (AutoAWQ / GPTQ's layout)
//   int4-gidx  the same with act-order g_idx (GPTQ desc_act)
//
// Random codes (no E4M3 NaN), scales and inputs; weight sets rotated so that L2 does not hold them.
//
// --model llama-3.1-70b-tp2 takes one rank's linears of Llama-3.1-70B at tensor parallelism 2
// (hidden 8192, 64 / 8 heads, intermediate 28672, each column- or row-split in two), the shapes of
// the 70B FP8 tp 2 decode step; a TFLOP/s column shows where the GEMM stands at many rows.
//
//   inflight-bench-gpu-quant [--rows 1,64] [--model llama-3.1-8b] [--formats fp8,int4]
//       [--linears gate_up,down] [--budget_ms 200]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpu_bench_util.h"
#include "gpu_llama_shape.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/quant_gemm_fp8.h"
#include "kernels/cuda/quant_linear.h"
#include "table.h"

namespace inflight::bench::gpu {
namespace {

namespace kc = kernels::cuda;

struct Options {
  std::vector<std::int64_t> rows = {1, 64};
  std::string model = "llama-3.1-8b";
  std::set<std::string> formats = {"fp8", "fp8-static", "int8", "int4", "int4-gidx"};
  std::set<std::string> linears = {"qkv", "attn_out", "gate_up", "down"};
  double budget_ms = 200;
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  tools::FlagSet flags("inflight-bench-gpu-quant",
                       "Quantized linears (fp8, int8, int4) at Llama-3-8B shapes against their "
                       "memory floor and the bf16 GEMM.");
  flags.Add("rows", "LIST", "token rows (default 1,64)", [&](const std::string& v) {
    return tools::ParseIntList("--rows", v, 1, 8192, &o.rows);
  });
  flags.Add(
      "model", "NAME",
      "the linears' shapes: llama-3.1-8b (default) or llama-3.1-70b-tp2 (one rank's)",
      [&](const std::string& v) {
        return tools::ParseChoice("--model", v, {"llama-3.1-8b", "llama-3.1-70b-tp2"}, &o.model);
      });
  flags.Add("formats", "LIST", "of fp8, fp8-static, int8, int4, int4-gidx (default all)",
            [&](const std::string& v) {
              return tools::ParseChoiceSet(
                  "--formats", v, {"fp8", "fp8-static", "int8", "int4", "int4-gidx"}, &o.formats);
            });
  flags.Add("linears", "LIST", "of qkv (70B only), attn_out, gate_up, down (default all)",
            [&](const std::string& v) {
              return tools::ParseChoiceSet("--linears", v, {"qkv", "attn_out", "gate_up", "down"},
                                           &o.linears);
            });
  AddBudgetFlag(flags, &o.budget_ms);
  ParseFlagsOrExit(flags, argc, argv);
  return o;
}

struct Format {
  std::string name;
  kc::QuantWeightKind kind;
  std::int64_t group_size;  // 0: per channel
  bool zeros, g_idx;
  bool static_fp8 = false;  // one weight scale, one static input scale
};

// One weight set on the device and its bytes.
struct DeviceWeight {
  DeviceBuffer codes, scales, zeros, g_idx;
  kc::QuantWeight view;
  std::int64_t bytes = 0;
};

DeviceWeight MakeWeight(const Format& f, std::int64_t n, std::int64_t k, std::mt19937_64& rng) {
  DeviceWeight w;
  const bool int4 = f.kind == kc::QuantWeightKind::kInt4;
  const std::int64_t groups = f.group_size > 0 ? (k + f.group_size - 1) / f.group_size : 1;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(n * (int4 ? k / 2 : k)));
  for (auto& b : codes) {
    b = static_cast<std::uint8_t>(rng());
    if (f.kind == kc::QuantWeightKind::kFp8E4M3 && (b & 0x7f) == 0x7f) b ^= 1;  // no NaN
  }
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  std::vector<float> scales(static_cast<std::size_t>(f.static_fp8 ? 1 : n * groups));
  for (auto& s : scales) s = scale(rng);
  w.codes = DeviceBuffer(codes.size());
  w.scales = DeviceBuffer(scales.size() * 4);
  BENCH_CUDA(cudaMemcpy(w.codes.get(), codes.data(), codes.size(), cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemcpy(w.scales.get(), scales.data(), scales.size() * 4, cudaMemcpyHostToDevice));
  w.view.kind = f.kind;
  w.view.codes = w.codes.get<std::uint8_t>();
  w.view.scales = w.scales.get<float>();
  w.view.num_groups = groups;
  w.view.group_size = f.group_size;
  w.view.per_tensor = f.static_fp8;
  w.view.input_scale = f.static_fp8 ? 1.0f / 448.0f : 0.0f;  // the inputs lie in [-1, 1]
  w.bytes = static_cast<std::int64_t>(codes.size() + scales.size() * 4);
  if (f.zeros) {
    std::vector<std::uint8_t> zeros(scales.size());
    for (auto& z : zeros) z = static_cast<std::uint8_t>(rng() % 17);
    w.zeros = DeviceBuffer(zeros.size());
    BENCH_CUDA(cudaMemcpy(w.zeros.get(), zeros.data(), zeros.size(), cudaMemcpyHostToDevice));
    w.view.zeros = w.zeros.get<std::uint8_t>();
    w.bytes += static_cast<std::int64_t>(zeros.size());
  }
  if (f.g_idx) {
    std::vector<std::int32_t> perm(static_cast<std::size_t>(k));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (auto& g : perm) g = static_cast<std::int32_t>(g / f.group_size);
    w.g_idx = DeviceBuffer(perm.size() * 4);
    BENCH_CUDA(cudaMemcpy(w.g_idx.get(), perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
    w.view.g_idx = w.g_idx.get<std::int32_t>();
    w.bytes += k * 4;
  }
  return w;
}

int Run(const Options& opt) {
  cudaStream_t stream = nullptr;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const DeviceInfo device = QueryDevice();
  std::cout << "# Quantized linears (" << opt.model
            << " shapes, bf16 activations)\n\nDevice: " << Describe(device) << "\n\n";
  const CopyCeiling copy = MeasureCopyCeiling(std::size_t{1} << 30, stream);
  std::cout << "Read-only stream " << Fmt(copy.read_gbps, 1)
            << " GB/s this run: floor = weight bytes / that rate.\n\n";
  kc::CublasLtGemm gemm;
  kc::CublasLtFp8Gemm fp8_gemm;
  if (gemm.status() != CUBLAS_STATUS_SUCCESS || fp8_gemm.status() != CUBLAS_STATUS_SUCCESS) {
    Die(__FILE__, __LINE__, "cuBLASLt init", CublasStatusName(gemm.status()));
  }
  kc::QuantLinear linear(gemm, kc::CublasLtFp8Gemm::DeviceSupportsFp8() ? &fp8_gemm : nullptr);
  std::vector<Format> formats;
  for (const Format& f :
       {Format{"fp8", kc::QuantWeightKind::kFp8E4M3, 0, false, false},
        Format{"fp8-static", kc::QuantWeightKind::kFp8E4M3, 0, false, false, true},
        Format{"int8", kc::QuantWeightKind::kInt8, 0, false, false},
        Format{"int4", kc::QuantWeightKind::kInt4, 128, true, false},
        Format{"int4-gidx", kc::QuantWeightKind::kInt4, 128, true, true}}) {
    if (opt.formats.count(f.name) != 0) formats.push_back(f);
  }
  struct Shape {
    const char* name;
    std::int64_t n, k;
  };
  // Llama-3.1-70B at tp 2, one rank: q/k/v (64 + 2 x 8 heads of 128) and gate/up split by output,
  // attention output and down by input.
  const std::vector<Shape> all_shapes =
      opt.model == "llama-3.1-70b-tp2"
          ? std::vector<Shape>{{"qkv 5120x8192", 5120, 8192},
                               {"attn_out 8192x4096", 8192, 4096},
                               {"gate_up 28672x8192", 28672, 8192},
                               {"down 8192x14336", 8192, 14336}}
          : std::vector<Shape>{{"attn_out 4096x4096", kHidden, kHidden},
                               {"gate_up 28672x4096", 2 * kInter, kHidden},
                               {"down 4096x14336", kHidden, kInter}};
  std::vector<Shape> shapes;
  for (const Shape& s : all_shapes) {
    const std::string name = s.name;
    if (opt.linears.count(name.substr(0, name.find(' '))) != 0) shapes.push_back(s);
  }
  const std::int64_t max_m = *std::max_element(opt.rows.begin(), opt.rows.end());
  std::mt19937_64 rng(1234);
  Table t({"linear", "rows", "format", "path", "median", "p10..p90", "TFLOP/s", "weights", "floor",
           "floor / median", "bf16 / this", "sets"});
  auto tflops = [](std::int64_t m, const Shape& s, double us) {
    return Fmt(2.0 * static_cast<double>(m * s.n * s.k) / (us * 1e6), 1);
  };
  for (const Shape& s : shapes) {
    const kc::QuantScratchBytes sizes = kc::QuantLinearScratchBytes(
        kc::QuantWeightKind::kFp8E4M3, max_m, s.n, s.k, s.n * s.k, kBf16);
    DeviceBuffer scratch_buf(static_cast<std::size_t>(sizes.total()));
    char* p = scratch_buf.get<char>();
    kc::QuantScratch scratch{p,
                             sizes.weight,
                             reinterpret_cast<std::uint8_t*>(p + sizes.weight),
                             sizes.act_codes,
                             reinterpret_cast<float*>(p + sizes.weight + sizes.act_codes),
                             sizes.act_scales,
                             p + sizes.weight + sizes.act_codes + sizes.act_scales,
                             sizes.raw_out};
    // The bf16 GEMM of each row count first, then each format's weight sets once for all rows.
    std::vector<Timing> bf16(opt.rows.size());
    const double bf16_bytes = static_cast<double>(s.n * s.k * kBf16);
    const double bf16_floor = bf16_bytes / (copy.read_gbps * 1e3);
    for (std::size_t r = 0; r < opt.rows.size(); ++r) {
      const std::int64_t m = opt.rows[r];
      const GemmResult g =
          TimeGemm(gemm, {"bf16", m, s.n, s.k, kDType}, device, opt.budget_ms, stream);
      bf16[r] = g.timing;
      t.AddRow({s.name, std::to_string(m), "bf16", "cublaslt", FmtUs(g.timing.median_us),
                Range(g.timing), tflops(m, s, g.timing.median_us), Fmt(bf16_bytes / 1e6, 1) + " MB",
                FmtUs(bf16_floor), Percent(bf16_floor, g.timing.median_us), "",
                std::to_string(g.rotations)});
    }
    for (const Format& f : formats) {
      std::vector<DeviceWeight> ws;
      ws.push_back(MakeWeight(f, s.n, s.k, rng));
      const int sets = Rotations(static_cast<std::size_t>(ws[0].bytes), device.l2_bytes,
                                 std::min<std::size_t>(FreeBytes() / 2, std::size_t{4} << 30));
      for (int i = 1; i < sets; ++i) ws.push_back(MakeWeight(f, s.n, s.k, rng));
      const double bytes = static_cast<double>(ws[0].bytes);
      const double floor_us = bytes / (copy.read_gbps * 1e3);
      for (std::size_t r = 0; r < opt.rows.size(); ++r) {
        const std::int64_t m = opt.rows[r];
        DeviceBuffer x(static_cast<std::size_t>(m * s.k * kBf16));
        DeviceBuffer y(static_cast<std::size_t>(m * s.n * kBf16));
        FillUniform(x.get(), kDType, static_cast<std::size_t>(m * s.k), -1.0f, 1.0f, 900, stream);
        TimingOptions to;
        to.budget_ms = opt.budget_ms;
        to.rotations = sets;
        // The rule's path, and for weight-only codes past the GEMV the other of the mixed GEMM
        // and the dequantizing path too, forced (where the rule switches between them).
        const kc::QuantLinearPath rule =
            linear.PathFor(ws[0].view, kDType, m, s.n, s.k, x.get(), s.k);
        std::vector<kc::QuantLinearPath> runs = {rule};
        const auto other = rule == kc::QuantLinearPath::kMixedGemm
                               ? kc::QuantLinearPath::kDequantGemm
                               : kc::QuantLinearPath::kMixedGemm;
        linear.force_path(other);
        if ((rule == kc::QuantLinearPath::kMixedGemm ||
             rule == kc::QuantLinearPath::kDequantGemm) &&
            linear.PathFor(ws[0].view, kDType, m, s.n, s.k, x.get(), s.k) == other) {
          runs.push_back(other);
        }
        for (const kc::QuantLinearPath path : runs) {
          linear.force_path(path);
          // fp8 at GEMM sizes once more with the scales applied inside cuBLASLt, where offered:
          // outer vectors (fp8), scalars (fp8-static).
          const kc::CublasLtFp8Gemm::ScaleModes modes{!f.static_fp8, !f.static_fp8};
          const bool in_gemm = path == kc::QuantLinearPath::kFp8Gemm &&
                               fp8_gemm.OffersScaled(kDType, m, s.n, s.k, modes, false);
          for (int variant = 0; variant < (in_gemm ? 2 : 1); ++variant) {
            linear.set_fp8_outer_vector_scales(variant == 1);
            linear.set_fp8_scalar_scales(variant == 1);
            const Timing tm = TimeCalls(
                [&](int call) {
                  return linear.Run(y.get(), s.n, x.get(), s.k,
                                    ws[static_cast<std::size_t>(call % sets)].view, nullptr, kDType,
                                    m, s.n, s.k, false, scratch, stream);
                },
                stream, to);
            t.AddRow(
                {s.name, std::to_string(m), variant == 1 ? f.name + " (cuBLASLt scales)" : f.name,
                 std::string(kc::QuantLinearPathName(path)) + (path == rule ? "" : " (forced)"),
                 FmtUs(tm.median_us), Range(tm), tflops(m, s, tm.median_us),
                 Fmt(bytes / 1e6, 1) + " MB", FmtUs(floor_us), Percent(floor_us, tm.median_us),
                 Fmt(bf16[r].median_us / tm.median_us, 2) + "x", std::to_string(sets)});
          }
        }
        linear.force_path(std::nullopt);
        linear.set_fp8_outer_vector_scales(false);
        linear.set_fp8_scalar_scales(true);
      }
    }
  }
  t.Print(std::cout);
  std::cout << "\nTFLOP/s: 2 x rows x outputs x inputs over the median (the whole linear: "
               "quantizing the activations and the scale epilogue included). "
               "floor / median: the share of the memory floor reached (100% = the weights "
               "stream at the read-only rate). bf16 / this: the bf16 GEMM's time over this one's. "
               "Medians over CUDA-graph replays; \"sets\": weight sets rotated past L2 ("
            << Fmt(static_cast<double>(device.l2_bytes) / 1048576.0, 0) << " MiB).\n";
  BENCH_CUDA(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace
}  // namespace inflight::bench::gpu

int main(int argc, char** argv) {
  const auto options = inflight::bench::gpu::ParseArgs(argc, argv);
  inflight::bench::gpu::ExitUnlessDeviceVisible("inflight-bench-gpu-quant");
  return inflight::bench::gpu::Run(options);
}
