// inflight-bench-gpu-overlap: can a mixed step's memory-bound decode work run beside its
// compute-bound prompt work on one H100? One transformer layer of a steady 2048/128 step (bf16,
// Llama-3.1-8B shapes): the prompt rows' four dense layers (qkv, o +=, gate/up, down +=) on one
// stream, the decode rows' paged attention (and, in the "+ GEMMs" rows, their own four dense layers
// at m = decode rows) on another, each side alone, one after the other, and both at once, with the
// prompt side's cuBLASLt kernels asked to leave SMs free (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET).
// "now" is what the runner does today: the dense layers once over all rows, then the attention.
// A second table confines the decode attention to N SMs (kernels/cuda/sm_subset_streams.h, high
// priority) beside the prompt side, which shows what N SMs of that kernel stream alone.
//
// Then the step's two attentions: the prompt rows' context attention (compute-bound) and the decode
// rows' decode attention (memory-bound), each alone, one after the other, on two ordinary streams,
// and with the context side on a stream confined to N SMs at high priority
// (kernels/cuda/sm_subset_streams.h) beside the decode side on every SM (what the runner does).
//
// Then, for the same dense layers at m = prompt + decode rows, every algorithm cuBLASLt's heuristic
// offers (up to 16) timed against the one it ranks first (the one the runner takes).
//
// Timing: CUDA events around each repetition (fork and join included), median of --reps after
// warm-up. Random inputs (never zeros), random non-monotonic block tables.
//
//   inflight-bench-gpu-overlap [--prompt_rows 3580] [--decode_seqs 223] [--decode_context 2112]
//       [--sm_targets 0,124,116,108,100] [--context_seqs 2] [--split_sms 16,24,32,40,48]
//       [--reps 30] [--sections overlap,attn,algos]
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gpu_bench_util.h"
#include "gpu_llama_shape.h"
#include "gpu_paged_setup.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/paged_attention_context.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "kernels/cuda/sm_subset_streams.h"
#include "table.h"

namespace inflight::bench::gpu {
namespace {

namespace kc = kernels::cuda;

struct Options {
  std::int64_t prompt_rows = 3580, decode_seqs = 223, decode_context = 2112;
  std::vector<std::int64_t> sm_targets = {0, 124, 116, 108, 100};
  std::int64_t context_seqs = 2;
  std::vector<std::int64_t> split_sms = {16, 24, 32, 40, 48};
  int reps = 30;
  std::set<std::string> sections = {"overlap", "attn", "algos"};
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  tools::FlagSet flags("inflight-bench-gpu-overlap",
                       "Decode work beside prompt work: one layer of a steady 2048/128 step.");
  const auto count = [&](const char* name, const char* help, std::int64_t* out) {
    flags.Add(name, "N", help, [name, out](const std::string& v) {
      return tools::ParseInt(std::string("--") + name, v, 1, 1 << 20, out);
    });
  };
  count("prompt_rows", "prompt rows of the step (default 3580)", &o.prompt_rows);
  count("decode_seqs", "decoding sequences (default 223)", &o.decode_seqs);
  count("decode_context", "keys per decoding sequence (default 2112)", &o.decode_context);
  count("context_seqs", "attn: prompt chunks the prompt rows split into (default 2)",
        &o.context_seqs);
  flags.Add("sm_targets", "LIST",
            "overlap: cuBLASLt SM targets, 0 = all (default 0,124,116,108,100)",
            [&](const std::string& v) {
              return tools::ParseIntList("--sm_targets", v, 0, 1024, &o.sm_targets);
            });
  flags.Add("split_sms", "LIST", "SMs of the confined side, one row each (default 16,24,32,40,48)",
            [&](const std::string& v) {
              return tools::ParseIntList("--split_sms", v, 0, 1024, &o.split_sms);
            });
  flags.Add("reps", "N", "repetitions per median (default 30)", [&](const std::string& v) {
    std::int64_t reps = 0;
    RETURN_IF_ERROR(tools::ParseInt("--reps", v, 1, 1 << 20, &reps));
    o.reps = static_cast<int>(reps);
    return Status::Ok();
  });
  flags.Add("sections", "LIST", "overlap, attn, algos (default: all)", [&](const std::string& v) {
    return tools::ParseChoiceSet("--sections", v, {"overlap", "attn", "algos"}, &o.sections);
  });
  ParseFlagsOrExit(flags, argc, argv);
  return o;
}

// One layer's weights and activations for `rows` rows (activations sized for the largest use).
struct Layer {
  DeviceBuffer qkv_w, o_w, gate_up_w, down_w;
  DeviceBuffer x, qkv, attn, residual, act, mlp;
  Layer(std::int64_t rows, cudaStream_t stream)
      : qkv_w(kQkvDim * kHidden * kBf16),
        o_w(kHidden * kHidden * kBf16),
        gate_up_w(2 * kInter * kHidden * kBf16),
        down_w(kHidden * kInter * kBf16),
        x(rows * kHidden * kBf16),
        qkv(rows * kQkvDim * kBf16),
        attn(rows * kHidden * kBf16),
        residual(rows * kHidden * kBf16),
        act(rows * kInter * kBf16),
        mlp(rows * 2 * kInter * kBf16) {
    std::uint64_t seed = 900;
    for (DeviceBuffer* b : {&qkv_w, &o_w, &gate_up_w, &down_w}) {
      FillUniform(b->get(), kDType, b->bytes() / kBf16, -0.02f, 0.02f, seed++, stream);
    }
    for (DeviceBuffer* b : {&x, &qkv, &attn, &residual, &act, &mlp}) {
      FillUniform(b->get(), kDType, b->bytes() / kBf16, -1.0f, 1.0f, seed++, stream);
    }
  }
};

void Check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) Die(__FILE__, __LINE__, what, CublasStatusName(st));
}

// The four dense layers over rows [0, m) of `l` (the activations' values do not matter here).
void DenseLayers(kc::CublasLtGemm& g, Layer& l, std::int64_t m, cudaStream_t s) {
  Check(g.Linear(l.qkv.get(), kDType, kQkvDim, l.x.get(), kHidden, l.qkv_w.get(), nullptr, kDType,
                 m, kQkvDim, kHidden, s),
        "qkv");
  Check(g.LinearAdd(l.residual.get(), kDType, kHidden, l.attn.get(), kHidden, l.o_w.get(), nullptr,
                    kDType, m, kHidden, kHidden, s),
        "o");
  Check(g.Linear(l.mlp.get(), kDType, 2 * kInter, l.x.get(), kHidden, l.gate_up_w.get(), nullptr,
                 kDType, m, 2 * kInter, kHidden, s),
        "gate_up");
  Check(g.LinearAdd(l.residual.get(), kDType, kHidden, l.act.get(), kInter, l.down_w.get(), nullptr,
                    kDType, m, kHidden, kInter, s),
        "down");
}

// Median milliseconds of `work` (which enqueues on main and may fork to side and join back).
double MedianMs(const std::function<void()>& work, cudaStream_t main, int reps) {
  cudaEvent_t a = nullptr, b = nullptr;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) work();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    BENCH_CUDA(cudaEventRecord(a, main));
    work();
    BENCH_CUDA(cudaEventRecord(b, main));
    BENCH_CUDA(cudaEventSynchronize(b));
    float t = 0;
    BENCH_CUDA(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Work to run on a stream of its own, forked from main and joined back (ForkJoinMs).
struct SideWork {
  cudaStream_t stream;
  std::function<void()> work;
};

// Median milliseconds of: each side's work on its stream after main's point so far, `on_main` on
// main, and main waiting for every side.
double ForkJoinMs(const std::vector<SideWork>& sides, const std::function<void()>& on_main,
                  cudaStream_t main, int reps) {
  cudaEvent_t fork = nullptr;
  BENCH_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  std::vector<cudaEvent_t> joins(sides.size(), nullptr);
  for (cudaEvent_t& e : joins) BENCH_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const double ms = MedianMs(
      [&] {
        BENCH_CUDA(cudaEventRecord(fork, main));
        for (std::size_t i = 0; i < sides.size(); ++i) {
          BENCH_CUDA(cudaStreamWaitEvent(sides[i].stream, fork, 0));
          sides[i].work();
          BENCH_CUDA(cudaEventRecord(joins[i], sides[i].stream));
        }
        on_main();
        for (cudaEvent_t e : joins) BENCH_CUDA(cudaStreamWaitEvent(main, e, 0));
      },
      main, reps);
  for (cudaEvent_t e : joins) BENCH_CUDA(cudaEventDestroy(e));
  BENCH_CUDA(cudaEventDestroy(fork));
  return ms;
}

// Streams confined to each of --split_sms SMs, or nullptr (with a line saying why) where the
// driver has no green contexts.
std::unique_ptr<kc::SmSubsetStreams> SplitStreams(const Options& opt) {
  std::vector<int> wants;
  for (std::int64_t n : opt.split_sms) wants.push_back(static_cast<int>(n));
  std::string error;
  std::unique_ptr<kc::SmSubsetStreams> subsets = kc::SmSubsetStreams::Create(wants, &error);
  if (subsets == nullptr) std::cout << "(no SM subsets: " << error << ")\n\n";
  return subsets;
}

void Overlap(const Options& opt, cudaStream_t main) {
  const auto B = static_cast<std::int32_t>(opt.decode_seqs);
  const auto C = static_cast<std::int32_t>(opt.decode_context);
  const std::int64_t P = opt.prompt_rows;
  int lo = 0, hi = 0;
  BENCH_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t side = nullptr, side_hi = nullptr;
  BENCH_CUDA(cudaStreamCreateWithPriority(&side, cudaStreamNonBlocking, lo));
  BENCH_CUDA(cudaStreamCreateWithPriority(&side_hi, cudaStreamNonBlocking, hi));

  Layer prompt(P + B, main), decode(B, main);
  PagedSetup p = MakePagedSetup(B, 1, C - 1, kTokensPerBlock, 1, 4242);
  Pools pools(p.num_blocks, main);
  const kc::PagedBatch batch = p.Batch(0);
  const kc::AttentionWindow full{};  // full attention
  const std::int32_t partition = kc::DecodePartitionTokens(batch, kKvHeads, full);
  DeviceBuffer ws(kc::PagedAttentionDecodeWorkspaceBytes(batch, kHeads, kHeadDim, partition, full));
  kc::CublasLtGemm decode_gemm;
  Check(decode_gemm.status(), "CublasLtGemm()");
  BENCH_CUDA(cudaStreamSynchronize(main));

  auto attention = [&](cudaStream_t s) {
    BENCH_CUDA(kc::PagedAttentionDecode(decode.attn.get(), decode.qkv.get(), kQkvDim, pools.k.get(),
                                        pools.v.get(), batch, kShape, kHeads, kScale, full, kDType,
                                        partition, ws.get(), ws.bytes(), s));
  };
  auto decode_side = [&](bool gemms, cudaStream_t s) {
    attention(s);
    if (gemms) DenseLayers(decode_gemm, decode, B, s);
  };
  const double kv_gb = 2.0 * B * C * kKvHeads * kHeadDim * kBf16 / 1e9;
  std::cout << "## One layer of a mixed step on two streams\n\nPrompt side: the four dense layers "
               "at m = "
            << P << ". Decode side: paged decode attention over " << B << " sequences of " << C
            << " keys (" << Fmt(kv_gb, 2)
            << " GB of K and V), + GEMMs: and the decode rows' own dense layers at m = " << B
            << ". Median of " << opt.reps << " repetitions, milliseconds.\n\n";

  kc::CublasLtGemm fused;
  Check(fused.status(), "CublasLtGemm()");
  const double now = MedianMs(
      [&] {
        DenseLayers(fused, prompt, P + B, main);
        attention(main);
      },
      main, opt.reps);
  std::cout << "now (dense layers at m = " << P + B
            << ", then the attention, one stream): " << Fmt(now, 3) << " ms\n\n";

  Table t({"SM target", "decode side", "prompt alone", "decode alone", "serial", "both, side low",
           "both, side high", "best vs now"});
  for (std::int64_t target : opt.sm_targets) {
    kc::CublasLtGemm g;
    Check(g.status(), "CublasLtGemm()");
    g.set_sm_count_target(static_cast<int>(target));
    for (bool gemms : {false, true}) {
      const double prompt_ms = MedianMs([&] { DenseLayers(g, prompt, P, main); }, main, opt.reps);
      const double decode_ms = MedianMs([&] { decode_side(gemms, main); }, main, opt.reps);
      const double serial = MedianMs(
          [&] {
            DenseLayers(g, prompt, P, main);
            decode_side(gemms, main);
          },
          main, opt.reps);
      auto both = [&](cudaStream_t s) {
        return ForkJoinMs(
            {{s, [&] { decode_side(gemms, s); }}}, [&] { DenseLayers(g, prompt, P, main); }, main,
            opt.reps);
      };
      const double low = both(side), high = both(side_hi);
      t.AddRow({target == 0 ? "all" : std::to_string(target), gemms ? "attn + GEMMs" : "attn",
                Fmt(prompt_ms, 3), Fmt(decode_ms, 3), Fmt(serial, 3), Fmt(low, 3), Fmt(high, 3),
                Fmt(now / std::min(low, high), 3) + "x"});
    }
  }
  t.Print(std::cout);
  std::cout << "\n";

  // The decode attention confined to N SMs (a green-context stream at high priority), beside the
  // prompt side's dense layers on main, with cuBLASLt told of every SM or of the other ones.
  const std::unique_ptr<kc::SmSubsetStreams> subsets = SplitStreams(opt);
  if (subsets != nullptr) {
    std::cout << "Decode attention on its own N SMs (high priority) beside the prompt side:\n\n";
    Table c({"decode SMs", "decode alone", "its GB/s", "SM target", "prompt alone", "both",
             "now / both"});
    for (std::size_t i = 0; i < subsets->sms().size(); ++i) {
      const cudaStream_t sub = subsets->stream(i);
      const int n = subsets->sms()[i];
      const auto confined = [&](const std::function<void()>& beside) {
        return ForkJoinMs({{sub, [&] { attention(sub); }}}, beside, main, opt.reps);
      };
      const double alone = confined([] {});
      for (int target : {0, subsets->device_sms() - n}) {
        kc::CublasLtGemm g;
        Check(g.status(), "CublasLtGemm()");
        g.set_sm_count_target(target);
        const double prompt_ms = MedianMs([&] { DenseLayers(g, prompt, P, main); }, main, opt.reps);
        const double both = confined([&] { DenseLayers(g, prompt, P, main); });
        c.AddRow({std::to_string(n), Fmt(alone, 3), Fmt(kv_gb / alone * 1e3, 0),
                  target == 0 ? "all" : std::to_string(target), Fmt(prompt_ms, 3), Fmt(both, 3),
                  Fmt(now / both, 3) + "x"});
      }
    }
    c.Print(std::cout);
    std::cout << "\n";
  }
  BENCH_CUDA(cudaStreamDestroy(side));
  BENCH_CUDA(cudaStreamDestroy(side_hi));
}

// The step's context attention (prompt rows in context_seqs equal chunks from position 0) and its
// decode attention: alone, in turn, side by side on ordinary streams, and with the context side on
// N SMs at high priority beside the decode side on every SM.
void Attention(const Options& opt, cudaStream_t main) {
  const auto B = static_cast<std::int32_t>(opt.decode_seqs);
  const auto C = static_cast<std::int32_t>(opt.decode_context);
  const auto S = static_cast<std::int32_t>(opt.context_seqs);
  const auto Q = static_cast<std::int32_t>(opt.prompt_rows / opt.context_seqs);
  PagedSetup dp = MakePagedSetup(B, 1, C - 1, kTokensPerBlock, 1, 4242);
  PagedSetup cp = MakePagedSetup(S, Q, 0, kTokensPerBlock, 1, 4343);
  Pools dpools(dp.num_blocks, main), cpools(cp.num_blocks, main);
  const kc::PagedBatch dbatch = dp.Batch(0), cbatch = cp.Batch(0);
  const kc::AttentionWindow full{};  // full attention
  const std::int32_t partition = kc::DecodePartitionTokens(dbatch, kKvHeads, full);
  DeviceBuffer ws(
      kc::PagedAttentionDecodeWorkspaceBytes(dbatch, kHeads, kHeadDim, partition, full));
  DeviceBuffer dq(B * kQkvDim * kBf16), dout(B * kHidden * kBf16);
  DeviceBuffer cq(static_cast<std::int64_t>(S) * Q * kQkvDim * kBf16);
  DeviceBuffer cout_(static_cast<std::int64_t>(S) * Q * kHidden * kBf16);
  FillUniform(dq.get(), kDType, dq.bytes() / kBf16, -1.0f, 1.0f, 71, main);
  FillUniform(cq.get(), kDType, cq.bytes() / kBf16, -1.0f, 1.0f, 72, main);
  BENCH_CUDA(cudaStreamSynchronize(main));
  auto decode = [&](cudaStream_t s) {
    BENCH_CUDA(kc::PagedAttentionDecode(dout.get(), dq.get(), kQkvDim, dpools.k.get(),
                                        dpools.v.get(), dbatch, kShape, kHeads, kScale, full,
                                        kDType, partition, ws.get(), ws.bytes(), s));
  };
  auto context = [&](cudaStream_t s) {
    BENCH_CUDA(kc::PagedAttentionContext(cout_.get(), cq.get(), kQkvDim, cpools.k.get(),
                                         cpools.v.get(), cbatch, kShape, kHeads, kScale, full,
                                         kDType, s));
  };
  // Context on a and, unless b is null, decode on b, forked from and joined back to main.
  auto forked = [&](cudaStream_t a, cudaStream_t b) {
    std::vector<SideWork> sides = {{a, [&] { context(a); }}};
    if (b != nullptr) sides.push_back({b, [&] { decode(b); }});
    return ForkJoinMs(
        sides, [] {}, main, opt.reps);
  };
  const double ctx_flops = 2.0 * 2.0 * S * (static_cast<double>(Q) * Q / 2) * kHeadDim * kHeads;
  const double kv_gb = 2.0 * B * C * kKvHeads * kHeadDim * kBf16 / 1e9;
  std::cout << "## The step's two attentions side by side\n\nContext: " << S << " prompt chunks of "
            << Q << " rows from position 0 (" << Fmt(ctx_flops / 1e12, 3)
            << " TFLOP causal). Decode: " << B << " sequences of " << C << " keys ("
            << Fmt(kv_gb, 2) << " GB of K and V). Median of " << opt.reps
            << " repetitions, milliseconds.\n\n";
  const double ctx_ms = MedianMs([&] { context(main); }, main, opt.reps);
  const double dec_ms = MedianMs([&] { decode(main); }, main, opt.reps);
  const double serial = MedianMs(
      [&] {
        decode(main);
        context(main);
      },
      main, opt.reps);
  int lo = 0, hi = 0;
  BENCH_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t s_lo = nullptr, s_hi = nullptr;
  BENCH_CUDA(cudaStreamCreateWithPriority(&s_lo, cudaStreamNonBlocking, lo));
  BENCH_CUDA(cudaStreamCreateWithPriority(&s_hi, cudaStreamNonBlocking, hi));
  Table t({"placement", "context SMs", "decode SMs", "context alone", "decode alone", "both",
           "serial / both"});
  t.AddRow({"one stream, in turn", "all", "all", Fmt(ctx_ms, 3), Fmt(dec_ms, 3), Fmt(serial, 3),
            "1.000x"});
  const double ctx_hi = forked(s_hi, s_lo), dec_hi = forked(s_lo, s_hi);
  t.AddRow({"two streams, context high", "all", "all", "", "", Fmt(ctx_hi, 3),
            Fmt(serial / ctx_hi, 3) + "x"});
  t.AddRow({"two streams, decode high", "all", "all", "", "", Fmt(dec_hi, 3),
            Fmt(serial / dec_hi, 3) + "x"});
  const std::unique_ptr<kc::SmSubsetStreams> subsets = SplitStreams(opt);
  if (subsets != nullptr) {
    for (std::size_t i = 0; i < subsets->sms().size(); ++i) {
      const cudaStream_t sub = subsets->stream(i);
      const double alone = forked(sub, nullptr), b = forked(sub, s_lo);
      t.AddRow({"context on its SMs (high), decode anywhere", std::to_string(subsets->sms()[i]),
                "all", Fmt(alone, 3), "", Fmt(b, 3), Fmt(serial / b, 3) + "x"});
    }
  }
  t.Print(std::cout);
  std::cout << "\n";
  BENCH_CUDA(cudaStreamDestroy(s_lo));
  BENCH_CUDA(cudaStreamDestroy(s_hi));
}

// Every heuristic candidate for y = x · wᵀ (bf16, fp32 accumulation, row-major [m, n]) timed.
void Algos(const Options& opt, cudaStream_t stream) {
  const std::int64_t m = opt.prompt_rows + opt.decode_seqs;
  std::cout << "## cuBLASLt's candidates for the dense layers at m = " << m
            << "\n\nEach row: the heuristic's first choice (what the runner takes) against the "
               "fastest of its candidates, median microseconds over graph replays.\n\n";
  cublasLtHandle_t h = nullptr;
  Check(cublasLtCreate(&h), "cublasLtCreate");
  const std::size_t ws_bytes = std::size_t{32} << 20;
  DeviceBuffer ws(ws_bytes);
  Table t({"layer", "n", "k", "candidates", "first", "fastest", "fastest is #", "first / fastest",
           "TFLOP/s first", "TFLOP/s fastest"});
  struct Shape {
    const char* name;
    std::int64_t n, k;
  };
  for (const Shape s : {Shape{"qkv", kQkvDim, kHidden}, Shape{"o", kHidden, kHidden},
                        Shape{"gate_up", 2 * kInter, kHidden}, Shape{"down", kHidden, kInter}}) {
    DeviceBuffer x(m * s.k * kBf16), w(s.n * s.k * kBf16), y(m * s.n * kBf16);
    FillUniform(x.get(), kDType, m * s.k, -1.0f, 1.0f, 1, stream);
    FillUniform(w.get(), kDType, s.n * s.k, -0.02f, 0.02f, 2, stream);
    cublasLtMatmulDesc_t desc = nullptr;
    Check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n));
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
    Check(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, u(s.k), u(s.n), s.k), "a");
    Check(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, u(s.k), u(m), s.k), "b");
    Check(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, u(s.n), u(m), s.n), "c");
    cublasLtMatmulPreference_t pref = nullptr;
    Check(cublasLtMatmulPreferenceCreate(&pref), "pref");
    const std::uint64_t wsb = ws_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                         sizeof(wsb));
    std::vector<cublasLtMatmulHeuristicResult_t> results(16);
    int found = 0;
    Check(cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c, c, pref, 16, results.data(), &found),
          "heuristic");
    std::vector<double> us;
    for (int i = 0; i < found; ++i) {
      TimingOptions to;
      to.budget_ms = 150;
      const float alpha = 1.0f, beta = 0.0f;
      const Timing tm = TimeCalls(
          [&](int) {
            const cublasStatus_t st =
                cublasLtMatmul(h, desc, &alpha, w.get(), a, x.get(), b, &beta, y.get(), c, y.get(),
                               c, &results[i].algo, ws.get(), ws_bytes, stream);
            return st == CUBLAS_STATUS_SUCCESS ? cudaGetLastError() : cudaErrorUnknown;
          },
          stream, to);
      us.push_back(tm.median_us);
    }
    const auto best = std::min_element(us.begin(), us.end());
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(s.n * s.k);
    t.AddRow({s.name, std::to_string(s.n), std::to_string(s.k), std::to_string(found), FmtUs(us[0]),
              FmtUs(*best), std::to_string(best - us.begin() + 1), Fmt(us[0] / *best, 3),
              Fmt(flops / us[0] / 1e6, 1), Fmt(flops / *best / 1e6, 1)});
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(desc);
  }
  t.Print(std::cout);
  std::cout << "\n";
  cublasLtDestroy(h);
}

}  // namespace
}  // namespace inflight::bench::gpu

int main(int argc, char** argv) {
  using namespace inflight::bench::gpu;
  const Options opt = ParseArgs(argc, argv);
  ExitUnlessDeviceVisible("inflight-bench-gpu-overlap");
  cudaStream_t stream = nullptr;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::cout << "# Overlap of decode and prompt work, and cuBLASLt's candidates\n\nDevice: "
            << Describe(QueryDevice()) << "\n\n";
  if (opt.sections.count("overlap")) Overlap(opt, stream);
  if (opt.sections.count("attn")) Attention(opt, stream);
  if (opt.sections.count("algos")) Algos(opt, stream);
  BENCH_CUDA(cudaStreamDestroy(stream));
  return 0;
}
