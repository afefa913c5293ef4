// inflight-bench-gpu-fp8-kv: paged decode attention over an FP8 KV cache
// (kernels/cuda/paged_attention_decode.h PagedAttentionDecodeFp8) at Llama-3.1-8B shapes (bf16
// queries, 32 q / 8 kv heads of 128, 64-token blocks), beside the bf16 cache's kernel at the same
// shape and the floor of the bytes it must read: FP8 K and V bytes / the read-only stream rate of
// this run, and one read-only kernel over as many bytes (launch and ramp included). With
// --prefill, causal context attention over an FP8 cache (PagedAttentionContextFp8) beside the bf16
// cache's kernel, in TFLOP/s.
//
// Random codes (no NaN code), random non-monotonic block tables, input sets rotated so that L2 does
// not hold them between calls; medians of CUDA-graph replays.
//
//   inflight-bench-gpu-fp8-kv [--shapes 1x4096,1x8192,8x2048] [--prefill 4x2048,1x8192]
//       [--budget_ms 200]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "gpu_bench_util.h"
#include "gpu_llama_shape.h"
#include "gpu_paged_setup.h"
#include "kernels/cuda/paged_attention_context.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "table.h"

namespace inflight::bench::gpu {
namespace {

namespace kc = kernels::cuda;

constexpr std::int64_t kFp8BlockBytes = kKvHeads * kTokensPerBlock * kHeadDim;  // one pool

struct Options {
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{1, 4096}, {1, 8192}, {8, 2048}};
  std::vector<std::pair<std::int64_t, std::int64_t>> prefill;  // sequences x prompt tokens
  double budget_ms = 200;
};

// "AxB,CxD" into (A, B), (C, D): A in 1..65535, B in 1..2^20.
Status ParseCells(const std::string& flag, const std::string& v,
                  std::vector<std::pair<std::int64_t, std::int64_t>>* cells) {
  cells->clear();
  std::size_t at = 0;
  while (at <= v.size()) {
    const std::size_t comma = std::min(v.find(',', at), v.size());
    const std::string item = v.substr(at, comma - at);
    const std::size_t x = item.find('x');
    long batch = 0, context = 0;
    if (x == std::string::npos || std::sscanf(item.c_str(), "%ldx%ld", &batch, &context) != 2 ||
        batch < 1 || batch > 65535 || context < 1 || context > (1 << 20)) {
      return InvalidArgument(flag + " item \"" + item +
                             "\" is not BATCHxTOKENS (1..65535 x 1..1048576)");
    }
    cells->emplace_back(batch, context);
    at = comma + 1;
  }
  return Status::Ok();
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  tools::FlagSet flags("inflight-bench-gpu-fp8-kv",
                       "Paged decode attention over an FP8 KV cache against the bf16 cache's "
                       "kernel and the FP8 bytes' read floor (Llama-3.1-8B shapes).");
  flags.Add("shapes", "LIST", "decode: batch x context cells (default 1x4096,1x8192,8x2048)",
            [&](const std::string& v) { return ParseCells("--shapes", v, &o.shapes); });
  flags.Add("prefill", "LIST",
            "context attention: sequences x prompt tokens cells (default none), e.g. 4x2048",
            [&](const std::string& v) { return ParseCells("--prefill", v, &o.prefill); });
  AddBudgetFlag(flags, &o.budget_ms);
  ParseFlagsOrExit(flags, argc, argv);
  return o;
}

// Random E4M3 codes whose exponent field stops at 14 (no NaN code, magnitudes up to 240).
__global__ void FillCodes(std::uint8_t* dst, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    dst[i] = static_cast<std::uint8_t>((h >> 13) & 0xf7u);
  }
}

// The scales of the random codes (magnitudes up to 240: dequantized values up to 1).
const kc::KvFp8Scales kCodeScales{1.0f / 240.0f, 1.0f / 240.0f};

// One cell's inputs: a bf16 cache (Pools) and an FP8 one of num_blocks blocks each (FillCodes,
// seeds `seed` and seed + 1), and queries (seed + 2) and outputs of `rows` tokens.
struct CellBuffers {
  Pools bf16;
  DeviceBuffer k8, v8, q, out;
  CellBuffers(std::int64_t num_blocks, std::int64_t rows, std::uint32_t seed, cudaStream_t stream)
      : bf16(num_blocks, stream),
        k8(static_cast<std::size_t>(num_blocks * kFp8BlockBytes)),
        v8(static_cast<std::size_t>(num_blocks * kFp8BlockBytes)),
        q(static_cast<std::size_t>(rows * kQkvDim * kBf16)),
        out(static_cast<std::size_t>(rows * kHeads * kHeadDim * kBf16)) {
    FillCodes<<<1024, 256, 0, stream>>>(k8.get<std::uint8_t>(), k8.bytes(), seed);
    FillCodes<<<1024, 256, 0, stream>>>(v8.get<std::uint8_t>(), v8.bytes(), seed + 1);
    BENCH_CUDA(cudaGetLastError());
    FillUniform(q.get(), kDType, q.bytes() / kBf16, -1.0f, 1.0f, seed + 2, stream);
  }
};

// Causal context attention of whole prompts (nothing cached) over an FP8 cache and over a bf16
// one holding the same number of tokens.
void Prefill(const Options& opt, cudaStream_t stream) {
  std::cout << "\n## Context attention (causal prefill) over an FP8 KV cache\n\nFLOPs per "
               "sequence of S tokens = 2 * 2 * S^2 * 128 * 32 / 2 (QK^T and PV, half the square "
               "under the causal mask). bf16: PagedAttentionContext over a bf16 cache.\n\n";
  Table t({"sequences x tokens", "fp8 median", "p10..p90", "fp8 TFLOP/s", "bf16 median",
           "bf16 TFLOP/s", "bf16 / fp8"});
  for (const auto& [n, s] : opt.prefill) {
    const auto N = static_cast<std::int32_t>(n), S = static_cast<std::int32_t>(s);
    PagedSetup p = MakePagedSetup(N, S, 0, kTokensPerBlock, 1, 4000 + N + S);
    CellBuffers b(p.num_blocks, n * s, 701, stream);
    TimingOptions to;
    to.budget_ms = opt.budget_ms;
    const Timing fp8 = TimeCalls(
        [&](int) {
          return kc::PagedAttentionContextFp8(b.out.get(), b.q.get(), kQkvDim, b.k8.get(),
                                              b.v8.get(), kCodeScales, p.Batch(0), kShape, kHeads,
                                              kScale, kc::AttentionWindow{}, kDType, stream);
        },
        stream, to);
    const Timing b16 = TimeCalls(
        [&](int) {
          return kc::PagedAttentionContext(b.out.get(), b.q.get(), kQkvDim, b.bf16.k.get(),
                                           b.bf16.v.get(), p.Batch(0), kShape, kHeads, kScale,
                                           kc::AttentionWindow{}, kDType, stream);
        },
        stream, to);
    const double flops = static_cast<double>(n) * 2.0 * 2.0 * static_cast<double>(s) *
                         static_cast<double>(s) * kHeadDim * kHeads / 2.0;
    t.AddRow({std::to_string(n) + " x " + std::to_string(s), FmtUs(fp8.median_us), Range(fp8),
              Fmt(flops / (fp8.median_us * 1e6), 1), FmtUs(b16.median_us),
              Fmt(flops / (b16.median_us * 1e6), 1), Fmt(b16.median_us / fp8.median_us, 2) + "x"});
  }
  t.Print(std::cout);
}

void Run(const Options& opt) {
  cudaStream_t stream = nullptr;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const DeviceInfo device = QueryDevice();
  const CopyCeiling copy = MeasureCopyCeiling(std::size_t{1} << 30, stream);
  std::cout << "# Paged decode attention over an FP8 KV cache (bf16 queries, 32 q / 8 kv heads, "
               "head dim 128, 64-token blocks)\n\nDevice: "
            << Describe(device) << "\n\nFP8 KV = batch x context x 8 kv heads x 128 x 1 byte x 2 "
            << "(K and V). Floor: those bytes at the read-only stream rate of this run ("
            << Fmt(copy.read_gbps, 1) << " GB/s; copy " << Fmt(copy.copy_gbps(), 1)
            << " GB/s); same-bytes read: one kernel that only reads as many bytes. bf16: "
               "PagedAttentionDecode over a bf16 cache of the same tokens (twice the bytes).\n\n";
  Table t({"batch", "context", "FP8 KV", "fp8 median", "p10..p90", "GB/s", "floor", "% of floor",
           "same-bytes read", "bf16 median", "bf16 / fp8", "sets"});
  for (const auto& [batch, context] : opt.shapes) {
    const auto B = static_cast<std::int32_t>(batch), C = static_cast<std::int32_t>(context);
    const std::int64_t blocks_per_seq = (C + kTokensPerBlock - 1) / kTokensPerBlock;
    // The bf16 pools dominate: size the rotation for them.
    const auto set_bytes = static_cast<std::size_t>(2 * B * blocks_per_seq * kBlockBytes);
    const int sets = Rotations(set_bytes, device.l2_bytes,
                               std::min<std::size_t>(FreeBytes() / 4, std::size_t{4} << 30));
    PagedSetup p = MakePagedSetup(B, 1, C - 1, kTokensPerBlock, sets, 3000 + B * 7 + C);
    CellBuffers b(p.num_blocks, B, 601, stream);
    const kc::PagedBatch first = p.Batch(0);
    const kc::AttentionWindow window{};
    TimingOptions to;
    to.budget_ms = opt.budget_ms;
    to.rotations = sets;

    const std::int32_t fp8_partition = kc::DecodePartitionTokens(first, kKvHeads, window, true);
    const std::size_t fp8_ws_bytes =
        kc::PagedAttentionDecodeWorkspaceBytes(first, kHeads, kHeadDim, fp8_partition, window);
    DeviceBuffer fp8_ws(fp8_ws_bytes);
    const Timing fp8 = TimeCalls(
        [&](int call) {
          return kc::PagedAttentionDecodeFp8(b.out.get(), b.q.get(), kQkvDim, b.k8.get(),
                                             b.v8.get(), kCodeScales, p.Batch(call % sets), kShape,
                                             kHeads, kScale, window, kDType, fp8_partition,
                                             fp8_ws.get(), fp8_ws_bytes, stream);
        },
        stream, to);
    const std::int32_t bf16_partition = kc::DecodePartitionTokens(first, kKvHeads, window);
    const std::size_t bf16_ws_bytes =
        kc::PagedAttentionDecodeWorkspaceBytes(first, kHeads, kHeadDim, bf16_partition, window);
    DeviceBuffer bf16_ws(bf16_ws_bytes);
    const Timing bf16_t = TimeCalls(
        [&](int call) {
          return kc::PagedAttentionDecode(b.out.get(), b.q.get(), kQkvDim, b.bf16.k.get(),
                                          b.bf16.v.get(), p.Batch(call % sets), kShape, kHeads,
                                          kScale, window, kDType, bf16_partition, bf16_ws.get(),
                                          bf16_ws_bytes, stream);
        },
        stream, to);

    const double fp8_bytes = 2.0 * B * static_cast<double>(C) * kKvHeads * kHeadDim;
    const double floor_us = fp8_bytes / (copy.read_gbps * 1e3);
    const Timing read =
        TimeRead(static_cast<std::size_t>(fp8_bytes), sets, device.sm_count, opt.budget_ms, stream);
    t.AddRow({std::to_string(B), std::to_string(C), Fmt(fp8_bytes / 1e6, 1) + " MB",
              FmtUs(fp8.median_us), Range(fp8), Fmt(fp8_bytes / (fp8.median_us * 1e3), 1),
              FmtUs(floor_us), Percent(floor_us, fp8.median_us), FmtUs(read.median_us),
              FmtUs(bf16_t.median_us), Fmt(bf16_t.median_us / fp8.median_us, 2) + "x",
              std::to_string(sets)});
  }
  t.Print(std::cout);
  std::cout << "\nTimes are medians over samples of CUDA-graph replays (p10..p90 beside them); "
               "\"sets\": input sets rotated so that L2 does not hold a call's inputs when it runs "
               "again.\n";
  if (!opt.prefill.empty()) Prefill(opt, stream);
  BENCH_CUDA(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace inflight::bench::gpu

int main(int argc, char** argv) {
  const auto options = inflight::bench::gpu::ParseArgs(argc, argv);
  inflight::bench::gpu::ExitUnlessDeviceVisible("inflight-bench-gpu-fp8-kv");
  inflight::bench::gpu::Run(options);
  return 0;
}
