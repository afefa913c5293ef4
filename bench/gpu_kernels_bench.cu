// inflight-bench-gpu-kernels: our CUDA kernels at Llama-3.1-8B shapes (bf16; 32 query / 8 KV heads
// of 128; hidden 4096; intermediate 14336; vocabulary 128256; 64-token KV blocks as the runner),
// each figure next to the ceiling measured at the start of the same run:
//
//   decode    paged decode attention, batch x context (x sliding window); GB/s = K and V bytes
//             read (of the window's keys only, with one) / time, against the copy ceiling, the
//             read-only stream, and one read-only kernel over the same number of bytes (the
//             floor at that size: launch and ramp included);
//   context   paged causal context attention (prefill), TFLOP/s counting 2*2*S^2*d*heads/2 per
//             sequence of S tokens, against cuBLASLt's 8192^3 bf16 rate;
//   norm      RMSNorm (with and without the fused residual) and SwiGLU, GB/s of bytes that must
//             move;
//   mlp       the MLP's gate/up layer and SwiGLU: cuBLASLt then the SwiGLU kernel (the separate
//             path) against kernels/cuda/gemm_swiglu.h (one kernel), TFLOP/s against the 8192^3
//             rate;
//   rope      RoPE + KV-cache write (decode rows and prefill chunks), with and without Qwen3's
//             fused q/k norm, GB/s;
//   sampling  argmax and top-k/top-p over 128256 fp32 logits per row, GB/s of logits read;
//   mlp-fp8   the FP8 gate/up layer to the down linear's codes: cuBLASLt then the codes pass,
//             against kernels/cuda/gemm_swiglu_fp8.h, TFLOP/s.
//
// Random inputs (never zeros), random non-monotonic block tables, warm-up first, median of many
// samples timed with CUDA events over graph replays; input sets rotated so that L2 does not hold
// them between calls.
//
//   inflight-bench-gpu-kernels [--sections decode,context,norm,mlp,rope,sampling,mlp-fp8]
//       [--batches 1,8,64,256] [--contexts 512,2048,4096,8192,16384,32768] [--decode_windows 0]
//       [--prefill 512,1024,2048,4096,8192,16384] [--mlp_tokens 256,1024,2048,3790,8192]
//       [--budget_ms 200]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "gpu_bench_util.h"
#include "gpu_kernels_bench.h"
#include "gpu_llama_shape.h"
#include "gpu_paged_setup.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_swiglu.h"
#include "kernels/cuda/paged_attention_context.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope_kv_write.h"
#include "table.h"

namespace inflight::bench::gpu {
namespace kernel_bench {

namespace kc = kernels::cuda;

std::string Gb(double bytes) {
  return Fmt(bytes / 1e9, 2) + " GB";
}
std::string Mb(double bytes) {
  return Fmt(bytes / 1e6, bytes < 1e7 ? 3 : 1);
}

void AddSeparateAndFusedRows(Table& t, const Options& opt, const Ceilings& c, std::int64_t tokens,
                             int sets, double flops,
                             const std::function<cudaError_t(int)>& separate,
                             const std::function<cudaError_t(int)>& fused, cudaStream_t stream) {
  TimingOptions to;
  to.budget_ms = opt.budget_ms;
  to.rotations = sets;
  const Timing sep = TimeCalls([&](int call) { return separate(call % sets); }, stream, to);
  const Timing one = TimeCalls([&](int call) { return fused(call % sets); }, stream, to);
  for (const Timing* tm : {&sep, &one}) {
    const double tflops = flops / (tm->median_us * 1e-6) / 1e12;
    t.AddRow({tm == &one ? "fused" : "separate", std::to_string(tokens), FmtUs(tm->median_us),
              Range(*tm), Fmt(tflops, 1), Percent(tflops, c.gemm_tflops),
              tm == &one ? Fmt(one.median_us / sep.median_us, 3) + "x" : "", std::to_string(sets)});
  }
}

namespace {

Options ParseArgs(int argc, char** argv) {
  Options o;
  tools::FlagSet flags("inflight-bench-gpu-kernels",
                       "Kernel micro-benchmarks: decode and context attention, norms, the MLP's "
                       "gate/up + SwiGLU, RoPE, sampling (Llama-3.1-8B shapes, bf16).");
  flags.Add("sections", "LIST",
            "decode, context, norm, mlp, rope, sampling, mlp-fp8 (default: all)",
            [&](const std::string& v) {
              return tools::ParseChoiceSet("--sections", v, kAllSections, &o.sections);
            });
  flags.Add("batches", "LIST", "decode batches (default 1,8,64,256)", [&](const std::string& v) {
    return tools::ParseIntList("--batches", v, 1, 65535, &o.batches);
  });
  flags.Add("contexts", "LIST", "decode contexts (default 512,2048,4096,8192,16384,32768)",
            [&](const std::string& v) {
              return tools::ParseIntList("--contexts", v, 1, 1 << 20, &o.contexts);
            });
  flags.Add("prefill", "LIST", "context attention lengths (default 512,1024,2048,4096,8192,16384)",
            [&](const std::string& v) {
              return tools::ParseIntList("--prefill", v, 1, 1 << 18, &o.prefill);
            });
  flags.Add("decode_partitions", "LIST",
            "keys per decode split, multiples of 64, one row each; 0 is the runner's choice "
            "(default 0)",
            [&](const std::string& v) -> Status {
              RETURN_IF_ERROR(
                  tools::ParseIntList("--decode_partitions", v, 0, 1 << 20, &o.decode_partitions));
              for (std::int64_t p : o.decode_partitions) {
                if (p % 64 != 0) {
                  return InvalidArgument("--decode_partitions item " + std::to_string(p) +
                                         " is not a multiple of 64");
                }
              }
              return Status::Ok();
            });
  flags.Add("decode_windows", "LIST",
            "decode sliding windows, one row each; 0 is full attention (default 0). A window "
            "reads min(context, window) keys a sequence: its floor is those keys' bytes",
            [&](const std::string& v) {
              return tools::ParseIntList("--decode_windows", v, 0, 1 << 20, &o.decode_windows);
            });
  flags.Add("mlp_tokens", "LIST", "gate/up + SwiGLU rows (default 256,1024,2048,3790,8192)",
            [&](const std::string& v) {
              return tools::ParseIntList("--mlp_tokens", v, 1, 1 << 16, &o.mlp_tokens);
            });
  AddBudgetFlag(flags, &o.budget_ms);
  ParseFlagsOrExit(flags, argc, argv);
  return o;
}

void Decode(const Options& opt, const Ceilings& c, cudaStream_t stream) {
  std::cout << "## Paged decode attention (bf16, 32 q / 8 kv heads, head dim 128, 64-token blocks)"
               "\n\nGB/s = K and V bytes read (batch x keys x 8 kv heads x 128 x 2 bytes x 2) / "
               "median, keys = the context, or with a sliding window min(context, window). Copy "
               "ceiling this run: "
            << Fmt(c.copy.copy_gbps(), 1) << " GB/s; read-only stream: " << Fmt(c.copy.read_gbps, 1)
            << " GB/s. Target (issue 5): >= 85% of copy from 4k context. Same-bytes read: one "
               "kernel that only reads as many bytes (rotated past L2), its time and its share "
               "of copy; % of it: this kernel's rate against that read's.\n\n";
  Table t({"batch", "context", "window", "KV read", "splits x keys", "median", "p10..p90", "GB/s",
           "% of copy", "% of read-only", "same-bytes read", "% of it", "sets"});
  for (std::int64_t batch : opt.batches) {
    for (std::int64_t context : opt.contexts) {
      const auto B = static_cast<std::int32_t>(batch), C = static_cast<std::int32_t>(context);
      const std::int64_t blocks_per_seq = (C + kTokensPerBlock - 1) / kTokensPerBlock;
      const auto set_bytes = static_cast<std::size_t>(2 * B * blocks_per_seq * kBlockBytes);
      const std::size_t free_now = FreeBytes();
      const int sets = Rotations(set_bytes, c.device.l2_bytes,
                                 std::min<std::size_t>(free_now / 3, std::size_t{4} << 30));
      if (static_cast<double>(set_bytes) * sets > 0.85 * static_cast<double>(free_now)) {
        t.AddRow({std::to_string(B), std::to_string(C), "-",
                  Mb(2.0 * B * C * kKvHeads * kHeadDim * kBf16) + " MB",
                  "skipped: needs " + Gb(static_cast<double>(set_bytes)) + ", " +
                      Gb(static_cast<double>(free_now)) + " free"});
        continue;
      }
      PagedSetup p = MakePagedSetup(B, 1, C - 1, kTokensPerBlock, sets, 1000 + B * 7 + C);
      Pools pools(p.num_blocks, stream);
      DeviceBuffer q(static_cast<std::size_t>(B * kQkvDim * kBf16));
      DeviceBuffer out(static_cast<std::size_t>(B * kHeads * kHeadDim * kBf16));
      FillUniform(q.get(), kDType, q.bytes() / kBf16, -1.0f, 1.0f, 503, stream);
      const kc::PagedBatch first = p.Batch(0);
      for (std::int64_t window_keys : opt.decode_windows) {
        const kc::AttentionWindow window{static_cast<std::int32_t>(window_keys), 0};
        // Keys each sequence reads: its window's, when it has one.
        const std::int64_t keys = window.windowed() ? std::min<std::int64_t>(C, window_keys) : C;
        const double kv_bytes = 2.0 * B * static_cast<double>(keys) * kKvHeads * kHeadDim * kBf16;
        // The floor at this size: one kernel that only reads the same bytes (launch and ramp
        // included), where memory allows rotating that many separate buffers beside the pools.
        const auto read_bytes = static_cast<std::size_t>(kv_bytes);
        const bool read_fits = static_cast<double>(read_bytes) * sets < 0.25 * FreeBytes();
        const Timing read =
            read_fits ? TimeRead(read_bytes, sets, c.device.sm_count, opt.budget_ms, stream)
                      : Timing{};
        for (std::int64_t asked : opt.decode_partitions) {
          // 0: the runner's choice of split (kernels/cuda/paged_attention_decode.h).
          const auto partition = asked > 0 ? static_cast<std::int32_t>(asked)
                                           : kc::DecodePartitionTokens(first, kKvHeads, window);
          const std::size_t ws_bytes =
              kc::PagedAttentionDecodeWorkspaceBytes(first, kHeads, kHeadDim, partition, window);
          DeviceBuffer ws(ws_bytes);
          TimingOptions to;
          to.budget_ms = opt.budget_ms;
          to.rotations = sets;
          const Timing tm = TimeCalls(
              [&](int call) {
                return kc::PagedAttentionDecode(
                    out.get(), q.get(), kQkvDim, pools.k.get(), pools.v.get(), p.Batch(call % sets),
                    kShape, kHeads, kScale, window, kDType, partition, ws.get(), ws_bytes, stream);
              },
              stream, to);
          const double gbps = kv_bytes / (tm.median_us * 1e3);
          const std::int64_t splits = (keys + partition - 1) / partition;
          t.AddRow({std::to_string(B), std::to_string(C),
                    window.windowed() ? std::to_string(window_keys) : "-", Mb(kv_bytes) + " MB",
                    std::to_string(splits) + " x " + std::to_string(partition), FmtUs(tm.median_us),
                    Range(tm), Fmt(gbps, 1), Percent(gbps, c.copy.copy_gbps()),
                    Percent(gbps, c.copy.read_gbps),
                    read_fits ? FmtUs(read.median_us) + " (" +
                                    Percent(kv_bytes / (read.median_us * 1e3), c.copy.copy_gbps()) +
                                    " of copy)"
                              : "-",
                    read_fits ? Percent(read.median_us, tm.median_us) : "-", std::to_string(sets)});
        }
      }
    }
  }
  t.Print(std::cout);
  std::cout << "\n";
}

void Context(const Options& opt, const Ceilings& c, cudaStream_t stream) {
  std::cout << "## Paged context attention (causal prefill, bf16, 32 q / 8 kv heads, head dim 128)"
               "\n\nFLOPs per sequence of S tokens = 2 * 2 * S^2 * d * heads / 2 (QK^T and PV, "
               "half the square under the causal mask; d = 128, heads = 32). Against cuBLASLt's "
               "bf16 8192^3 rate of this run: "
            << Fmt(c.gemm_tflops, 1) << " TFLOP/s. Target (issue 5): >= 450 TFLOP/s at 4k+ tokens."
            << "\n\n";
  Table t({"sequences x tokens", "total tokens", "median", "p10..p90", "TFLOP/s", "% of GEMM rate",
           "% of 450 target"});
  const std::int64_t total = *std::max_element(opt.prefill.begin(), opt.prefill.end());
  for (std::int64_t s : opt.prefill) {
    std::vector<std::int64_t> seq_counts = {1};
    if (total / s > 1) seq_counts.push_back(total / s);
    for (std::int64_t n : seq_counts) {
      const auto N = static_cast<std::int32_t>(n), S = static_cast<std::int32_t>(s);
      PagedSetup p = MakePagedSetup(N, S, 0, kTokensPerBlock, 1, 2000 + N + S);
      Pools pools(p.num_blocks, stream);
      const std::int64_t rows = n * s;
      DeviceBuffer q(static_cast<std::size_t>(rows * kQkvDim * kBf16));
      DeviceBuffer out(static_cast<std::size_t>(rows * kHeads * kHeadDim * kBf16));
      FillUniform(q.get(), kDType, q.bytes() / kBf16, -1.0f, 1.0f, 504, stream);
      TimingOptions to;
      to.budget_ms = opt.budget_ms;
      const Timing tm = TimeCalls(
          [&](int) {
            return kc::PagedAttentionContext(out.get(), q.get(), kQkvDim, pools.k.get(),
                                             pools.v.get(), p.Batch(0), kShape, kHeads, kScale,
                                             kc::AttentionWindow{}, kDType, stream);
          },
          stream, to);
      const double flops = static_cast<double>(n) * 2.0 * 2.0 * static_cast<double>(s) *
                           static_cast<double>(s) * kHeadDim * kHeads / 2.0;
      const double tflops = flops / (tm.median_us * 1e-6) / 1e12;
      t.AddRow({std::to_string(n) + " x " + std::to_string(s), std::to_string(rows),
                FmtUs(tm.median_us), Range(tm), Fmt(tflops, 1), Percent(tflops, c.gemm_tflops),
                Percent(tflops, 450.0)});
    }
  }
  t.Print(std::cout);
  std::cout << "\n";
}

const std::vector<std::int64_t> kTokenCounts = {1, 16, 64, 256, 1024, 4096, 8192};

void Norm(const Options& opt, const Ceilings& c, cudaStream_t stream) {
  std::cout << "## RMSNorm and SwiGLU (bf16, hidden 4096, intermediate 14336)\n\nGB/s = bytes "
               "that must move / median: RMSNorm x read + out written (+ residual read and "
               "written) + weight; SwiGLU [T, 2 x 14336] read + [T, 14336] written. Copy ceiling "
               "this run: "
            << Fmt(c.copy.copy_gbps(), 1) << " GB/s.\n\n";
  Table t({"op", "tokens", "bytes/call", "median", "p10..p90", "GB/s", "% of copy", "sets"});
  DeviceBuffer weight(static_cast<std::size_t>(kHidden * kBf16));
  FillUniform(weight.get(), kDType, kHidden, 0.5f, 1.5f, 601, stream);
  for (int op = 0; op < 3; ++op) {
    for (std::int64_t T : kTokenCounts) {
      const std::int64_t row = op == 2 ? 3 * kInter : kHidden;    // SwiGLU: 2 in + 1 out per token
      const std::int64_t arrays = op == 0 ? 2 : op == 1 ? 3 : 1;  // x, out (+ residual)
      const auto set_bytes = static_cast<std::size_t>(T * row * kBf16 * arrays);
      const int sets = Rotations(set_bytes, c.device.l2_bytes, std::size_t{1} << 30);
      std::vector<DeviceBuffer> in, out, res;
      for (int i = 0; i < sets; ++i) {
        if (op == 2) {
          in.emplace_back(static_cast<std::size_t>(T * 2 * kInter * kBf16));
          out.emplace_back(static_cast<std::size_t>(T * kInter * kBf16));
        } else {
          in.emplace_back(static_cast<std::size_t>(T * kHidden * kBf16));
          out.emplace_back(static_cast<std::size_t>(T * kHidden * kBf16));
          if (op == 1) res.emplace_back(static_cast<std::size_t>(T * kHidden * kBf16));
        }
        FillUniform(in.back().get(), kDType, in.back().bytes() / kBf16, -2.0f, 2.0f, 610 + i,
                    stream);
        if (op == 1) {
          FillUniform(res.back().get(), kDType, res.back().bytes() / kBf16, -2.0f, 2.0f, 650 + i,
                      stream);
        }
      }
      TimingOptions to;
      to.budget_ms = opt.budget_ms;
      to.rotations = sets;
      const Timing tm = TimeCalls(
          [&](int call) {
            const int i = call % sets;
            if (op == 2) return kc::SwiGlu(out[i].get(), in[i].get(), kDType, T, kInter, stream);
            return kc::RmsNorm(out[i].get(), in[i].get(), op == 1 ? res[i].get() : nullptr,
                               weight.get(), kDType, T, kHidden, 1e-5f, stream);
          },
          stream, to);
      const double bytes = op == 0   ? (2.0 * T * kHidden + kHidden) * kBf16
                           : op == 1 ? (4.0 * T * kHidden + kHidden) * kBf16
                                     : 3.0 * T * kInter * kBf16;
      const double gbps = bytes / (tm.median_us * 1e3);
      const char* name = op == 0 ? "rmsnorm" : op == 1 ? "rmsnorm + residual" : "swiglu";
      t.AddRow({name, std::to_string(T), Mb(bytes) + " MB", FmtUs(tm.median_us), Range(tm),
                Fmt(gbps, 1), Percent(gbps, c.copy.copy_gbps()), std::to_string(sets)});
    }
  }
  t.Print(std::cout);
  std::cout << "\n";
}

void Mlp(const Options& opt, const Ceilings& c, cudaStream_t stream) {
  std::cout << "## The MLP's gate/up layer and SwiGLU (bf16, hidden 4096 -> 2 x 14336 -> 14336)"
               "\n\nTFLOP/s = 2 x tokens x 28672 x 4096 / median, against cuBLASLt's 8192^3 "
               "rate this run ("
            << Fmt(c.gemm_tflops, 1)
            << "). separate: CublasLtGemm::Linear to [T, 28672], then the SwiGLU kernel; "
               "fused: kernels/cuda/gemm_swiglu.h.\n\n";
  Table t(kPairColumns);
  kc::CublasLtGemm gemm;
  if (gemm.status() != CUBLAS_STATUS_SUCCESS) {
    Die(__FILE__, __LINE__, "CublasLtGemm()", CublasStatusName(gemm.status()));
  }
  const auto w_bytes = static_cast<std::size_t>(2 * kInter * kHidden * kBf16);
  for (std::int64_t T : opt.mlp_tokens) {
    const auto x_bytes = static_cast<std::size_t>(T * kHidden * kBf16);
    const auto mid_bytes = static_cast<std::size_t>(T * 2 * kInter * kBf16);
    const auto out_bytes = static_cast<std::size_t>(T * kInter * kBf16);
    const int sets = Rotations(x_bytes + w_bytes + out_bytes, c.device.l2_bytes,
                               std::min<std::size_t>(FreeBytes() / 2, std::size_t{4} << 30));
    std::vector<DeviceBuffer> xs, ws, outs;
    DeviceBuffer mid(mid_bytes);
    const float w_scale = 1.0f / std::sqrt(static_cast<float>(kHidden));
    for (int i = 0; i < sets; ++i) {
      xs.emplace_back(x_bytes);
      ws.emplace_back(w_bytes);
      outs.emplace_back(out_bytes);
      FillUniform(xs.back().get(), kDType, x_bytes / kBf16, -1.0f, 1.0f, 700 + i, stream);
      FillUniform(ws.back().get(), kDType, w_bytes / kBf16, -w_scale, w_scale, 720 + i, stream);
    }
    if (!kc::GemmSwiGluSupports(kDType, T, kInter, kHidden, xs[0].get(), kHidden, ws[0].get(),
                                outs[0].get(), kInter)) {
      std::cout << "(fused kernel not available on this device: no sm_90a code)\n\n";
      return;
    }
    AddSeparateAndFusedRows(
        t, opt, c, T, sets, 2.0 * static_cast<double>(T) * 2 * kInter * kHidden,
        [&](int i) {
          const cublasStatus_t st =
              gemm.Linear(mid.get(), kDType, 2 * kInter, xs[i].get(), kHidden, ws[i].get(), nullptr,
                          kDType, T, 2 * kInter, kHidden, stream);
          if (st != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
          return kc::SwiGlu(outs[i].get(), mid.get(), kDType, T, kInter, stream);
        },
        [&](int i) {
          return kc::GemmSwiGlu(outs[i].get(), kInter, xs[i].get(), kHidden, ws[i].get(), kDType, T,
                                kInter, kHidden, stream);
        },
        stream);
  }
  t.Print(std::cout);
  std::cout << "\n";
}

void Rope(const Options& opt, const Ceilings& c, cudaStream_t stream) {
  // Per token: q read + written (32 x 128), k read + written in place and to the pool, v read and
  // written to the pool (8 x 128 each), bf16.
  constexpr double kBytesPerToken =
      (2.0 * kHeads * kHeadDim + 3.0 * kKvHeads * kHeadDim + 2.0 * kKvHeads * kHeadDim) * kBf16;
  std::cout
      << "## RoPE + KV-cache write (bf16, fused qkv rows of 6144, 64-token blocks)\n\nGB/s = "
      << Fmt(kBytesPerToken, 0)
      << " bytes per token (q read+written, k read+written+pooled, v read+pooled) / median. "
         "Decode: T sequences of one new token at position 63 (one block each, so that the "
         "rotated pools stay small); prefill: one sequence of T new tokens. Copy ceiling this run: "
      << Fmt(c.copy.copy_gbps(), 1) << " GB/s.\n\n";
  // Llama 3's theta; the frequencies do not change the work.
  std::vector<float> inv_freq(kHeadDim / 2);
  for (std::int64_t i = 0; i < kHeadDim / 2; ++i) {
    inv_freq[static_cast<std::size_t>(i)] =
        static_cast<float>(std::pow(500000.0, -2.0 * static_cast<double>(i) / kHeadDim));
  }
  DeviceBuffer d_inv_freq(inv_freq.size() * sizeof(float));
  BENCH_CUDA(
      cudaMemcpy(d_inv_freq.get(), inv_freq.data(), d_inv_freq.bytes(), cudaMemcpyHostToDevice));
  // Dynamic RoPE's table per sequence (the same values: only the addressing differs).
  std::vector<float> per_seq;
  for (int s = 0; s < 256; ++s) per_seq.insert(per_seq.end(), inv_freq.begin(), inv_freq.end());
  DeviceBuffer d_per_seq(per_seq.size() * sizeof(float));
  BENCH_CUDA(
      cudaMemcpy(d_per_seq.get(), per_seq.data(), d_per_seq.bytes(), cudaMemcpyHostToDevice));
  // Qwen3's q/k norm weights, fused into the same kernel (the "+ qk norm" rows): the same bytes.
  DeviceBuffer d_q_norm(static_cast<std::size_t>(kHeadDim * kBf16)),
      d_k_norm(static_cast<std::size_t>(kHeadDim * kBf16));
  FillUniform(d_q_norm.get(), kDType, kHeadDim, 0.5f, 1.5f, 702, stream);
  FillUniform(d_k_norm.get(), kDType, kHeadDim, 0.5f, 1.5f, 703, stream);
  Table t({"mode", "tokens", "bytes/call", "median", "p10..p90", "GB/s", "% of copy", "sets"});
  // rope: one table with scale 1 (every engine but yarn and dynamic), yarn's attention factor on
  // cos and sin, or dynamic RoPE's table per sequence.
  enum class Rope { kPlain, kYarnScale, kPerSequence };
  struct Case {
    const char* mode;
    std::int32_t seqs, query_len, cached;
    Rope rope = Rope::kPlain;
    bool qk_norm = false;
  };
  const std::vector<Case> cases = {{"decode", 1, 1, 63},
                                   {"decode", 8, 1, 63},
                                   {"decode", 64, 1, 63},
                                   {"decode", 256, 1, 63},
                                   {"prefill", 1, 512, 0},
                                   {"prefill", 1, 2048, 0},
                                   {"prefill", 1, 8192, 0},
                                   {"decode, yarn scale", 64, 1, 63, Rope::kYarnScale},
                                   {"decode, table per sequence", 64, 1, 63, Rope::kPerSequence},
                                   {"prefill, yarn scale", 1, 2048, 0, Rope::kYarnScale},
                                   {"prefill, table per sequence", 1, 2048, 0, Rope::kPerSequence},
                                   {"decode + qk norm", 1, 1, 63, Rope::kPlain, true},
                                   {"decode + qk norm", 64, 1, 63, Rope::kPlain, true},
                                   {"prefill + qk norm", 1, 2048, 0, Rope::kPlain, true}};
  for (const Case& cs : cases) {
    const std::int64_t T = static_cast<std::int64_t>(cs.seqs) * cs.query_len;
    // A set: the qkv rows read and the pool blocks written (whole blocks are allocated).
    const std::int64_t set_blocks =
        cs.seqs * ((cs.cached + cs.query_len + kTokensPerBlock - 1) / kTokensPerBlock);
    const auto set_bytes =
        static_cast<std::size_t>(T * kQkvDim * kBf16 + 2 * set_blocks * kBlockBytes);
    const int sets = Rotations(set_bytes, c.device.l2_bytes, std::size_t{1} << 30);
    PagedSetup p =
        MakePagedSetup(cs.seqs, cs.query_len, cs.cached, kTokensPerBlock, sets, 3000 + T);
    Pools pools(p.num_blocks, stream);
    std::vector<DeviceBuffer> qkv;
    for (int i = 0; i < sets; ++i) {
      qkv.emplace_back(static_cast<std::size_t>(T * kQkvDim * kBf16));
      FillUniform(qkv.back().get(), kDType, qkv.back().bytes() / kBf16, -1.0f, 1.0f, 700 + i,
                  stream);
    }
    TimingOptions to;
    to.budget_ms = opt.budget_ms;
    to.rotations = sets;
    const kc::RopeTable rope =
        cs.rope == Rope::kPerSequence
            ? kc::RopeTable{d_per_seq.get<float>(), static_cast<std::int32_t>(kHeadDim / 2), 1.0f}
            : kc::RopeTable{d_inv_freq.get<float>(), 0,
                            cs.rope == Rope::kYarnScale ? 1.1386294f : 1.0f};
    const Timing tm = TimeCalls(
        [&](int call) {
          const int i = call % sets;
          char* q = qkv[i].get<char>();
          char* k = q + kHeads * kHeadDim * kBf16;
          char* v = k + kKvHeads * kHeadDim * kBf16;
          kc::QkNormWeights norm;
          if (cs.qk_norm) norm = {d_q_norm.get(), d_k_norm.get(), 1e-6f};
          return kc::RopeKvWrite(q, k, v, kQkvDim, kHeads, pools.k.get(), pools.v.get(), p.Batch(i),
                                 kShape, rope, norm, kDType, stream);
        },
        stream, to);
    const double bytes = kBytesPerToken * static_cast<double>(T);
    const double gbps = bytes / (tm.median_us * 1e3);
    t.AddRow({cs.mode, std::to_string(T), Mb(bytes) + " MB", FmtUs(tm.median_us), Range(tm),
              Fmt(gbps, 1), Percent(gbps, c.copy.copy_gbps()), std::to_string(sets)});
  }
  t.Print(std::cout);
  std::cout << "\n";
}

int Run(const Options& opt) {
  cudaStream_t stream = nullptr;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Ceilings c;
  c.device = QueryDevice();
  std::cout << "# GPU kernels (Llama-3.1-8B shapes, bf16)\n\nDevice: " << Describe(c.device)
            << "\n\n";
  c.copy = MeasureCopyCeiling(std::size_t{1} << 30, stream);
  {
    kc::CublasLtGemm gemm;
    if (gemm.status() != CUBLAS_STATUS_SUCCESS) {
      Die(__FILE__, __LINE__, "CublasLtGemm()", CublasStatusName(gemm.status()));
    }
    c.gemm_tflops =
        TimeGemm(gemm, {"8192^3", 8192, 8192, 8192, kDType}, c.device, opt.budget_ms, stream)
            .tflops;
  }
  std::cout << "Ceilings measured in this run: copy " << Fmt(c.copy.copy_gbps(), 1)
            << " GB/s (read + written; cudaMemcpyAsync " << Fmt(c.copy.memcpy_gbps, 1)
            << ", copy kernel " << Fmt(c.copy.kernel_gbps, 1) << "), read-only stream "
            << Fmt(c.copy.read_gbps, 1) << " GB/s, cuBLASLt bf16 8192^3 " << Fmt(c.gemm_tflops, 1)
            << " TFLOP/s.\n\n";
  if (opt.sections.count("decode")) Decode(opt, c, stream);
  if (opt.sections.count("context")) Context(opt, c, stream);
  if (opt.sections.count("norm")) Norm(opt, c, stream);
  if (opt.sections.count("mlp")) Mlp(opt, c, stream);
  if (opt.sections.count("rope")) Rope(opt, c, stream);
  if (opt.sections.count("sampling")) Sampling(opt, c, stream);
  if (opt.sections.count("mlp-fp8")) MlpFp8(opt, c, stream);
  std::cout << "Times are medians over samples of CUDA-graph replays (p10..p90 beside them); "
               "\"sets\": input sets rotated so that L2 ("
            << Fmt(static_cast<double>(c.device.l2_bytes) / 1048576.0, 0)
            << " MiB) does not hold a call's inputs when it runs again.\n";
  BENCH_CUDA(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace
}  // namespace kernel_bench
}  // namespace inflight::bench::gpu

int main(int argc, char** argv) {
  const auto options = inflight::bench::gpu::kernel_bench::ParseArgs(argc, argv);
  inflight::bench::gpu::ExitUnlessDeviceVisible("inflight-bench-gpu-kernels");
  return inflight::bench::gpu::kernel_bench::Run(options);
}
