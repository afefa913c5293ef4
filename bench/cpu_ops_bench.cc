// inflight-bench-cpu-ops: the CPU reference ops (src/kernels/cpu) at Llama-3.1-8B-like shapes, each
// with its achieved GB/s (bytes it must move / median time) and GFLOP/s, next to the memcpy
// bandwidth measured in the same run. Memory-bound rows (decode linear, norms, decode attention)
// compare against that ceiling.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/dtype.h"
#include "common/flags.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/thread_pool.h"
#include "memcpy_bandwidth.h"
#include "table.h"

namespace inflight::bench {
namespace {

namespace cpu = kernels::cpu;

struct Options {
  std::int64_t threads = 0;  // 0: hardware concurrency
  double min_time_s = 0.3;
  std::int64_t memcpy_mb = 512;
};

// Median seconds of one call of `fn`, over at least 3 calls and `min_time_s` (after one warm-up
// call).
double TimeMedian(const std::function<void()>& fn, double min_time_s) {
  fn();
  std::vector<double> times;
  const double start = NowSeconds();
  while (times.size() < 3 || (NowSeconds() - start < min_time_s && times.size() < 1000)) {
    const double t0 = NowSeconds();
    fn();
    times.push_back(NowSeconds() - t0);
  }
  return Median(times);
}

std::vector<float> RandomFloats(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<std::uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = FloatToBf16(v[i]);
  return out;
}

struct Row {
  std::string op, shape;
  double seconds = 0, bytes = 0, flops = 0;
  bool memory_bound = true;
};

Row BenchLinear(cpu::ThreadPool* pool, const Options& opt, std::int64_t tokens, std::int64_t in,
                std::int64_t out, DType dtype) {
  const auto x = RandomFloats(static_cast<std::size_t>(tokens * in), 1);
  const auto w32 = RandomFloats(static_cast<std::size_t>(in * out), 2);
  const auto w16 = dtype == DType::kBFloat16 ? ToBf16(w32) : std::vector<std::uint16_t>{};
  std::vector<float> y(static_cast<std::size_t>(tokens * out));
  const cpu::WeightPtr w =
      dtype == DType::kBFloat16 ? cpu::WeightPtr(w16.data(), dtype) : cpu::WeightPtr(w32.data());
  Row r{"linear " + std::string(DTypeName(dtype)),
        std::to_string(tokens) + " x " + std::to_string(in) + " -> " + std::to_string(out)};
  r.seconds = TimeMedian(
      [&] { cpu::Linear(y.data(), x.data(), in, w, cpu::WeightPtr(), tokens, in, out, pool); },
      opt.min_time_s);
  r.bytes = static_cast<double>(in * out) * static_cast<double>(DTypeSize(dtype)) +
            4.0 * static_cast<double>(tokens * (in + out));
  r.flops = 2.0 * static_cast<double>(tokens * in * out);
  r.memory_bound = tokens <= 8;
  return r;
}

Row BenchRmsNorm(const Options& opt, std::int64_t tokens, std::int64_t hidden, bool residual) {
  auto x = RandomFloats(static_cast<std::size_t>(tokens * hidden), 3);
  auto res = RandomFloats(static_cast<std::size_t>(tokens * hidden), 4);
  const auto weight = RandomFloats(static_cast<std::size_t>(hidden), 5);
  std::vector<float> out(x.size());
  Row r{residual ? "rmsnorm + residual" : "rmsnorm",
        std::to_string(tokens) + " x " + std::to_string(hidden)};
  r.seconds = TimeMedian(
      [&] {
        cpu::RmsNorm(out.data(), x.data(), residual ? res.data() : nullptr,
                     cpu::WeightPtr(weight.data()), tokens, hidden, 1e-5f);
      },
      opt.min_time_s);
  // x read, out written (+ residual read and written), weight read.
  r.bytes = 4.0 * static_cast<double>(tokens * hidden) * (residual ? 4.0 : 2.0) +
            4.0 * static_cast<double>(hidden);
  r.flops = 4.0 * static_cast<double>(tokens * hidden);
  return r;
}

// `num_seqs` sequences, each with `cached` positions in the pools and `new_tokens` new query rows.
Row BenchAttention(cpu::ThreadPool* pool, const Options& opt, std::int32_t num_seqs,
                   std::int32_t cached, std::int32_t new_tokens) {
  const std::int64_t heads = 32, kv_heads = 8, head_dim = 128, block = 64;
  const cpu::PagedKvShape shape{kv_heads, block, head_dim};
  const std::int32_t blocks_per_seq = (cached + new_tokens + static_cast<std::int32_t>(block) - 1) /
                                      static_cast<std::int32_t>(block);
  const std::int64_t num_blocks = static_cast<std::int64_t>(num_seqs) * blocks_per_seq;
  const auto k = RandomFloats(static_cast<std::size_t>(num_blocks * shape.BlockFloats()), 6);
  const auto v = RandomFloats(static_cast<std::size_t>(num_blocks * shape.BlockFloats()), 7);
  // Non-monotonic block ids, as the block manager hands them out after reuse.
  std::vector<std::int32_t> tables(static_cast<std::size_t>(num_blocks));
  for (std::int64_t i = 0; i < num_blocks; ++i)
    tables[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7919) % num_blocks);
  std::vector<std::int32_t> query_start(static_cast<std::size_t>(num_seqs) + 1),
      num_cached(num_seqs, cached);
  for (std::int32_t s = 0; s <= num_seqs; ++s)
    query_start[static_cast<std::size_t>(s)] = s * new_tokens;
  const std::int64_t rows = static_cast<std::int64_t>(num_seqs) * new_tokens;
  const auto q = RandomFloats(static_cast<std::size_t>(rows * heads * head_dim), 8);
  std::vector<float> out(q.size());
  cpu::PagedBatch batch;
  batch.num_seqs = num_seqs;
  batch.query_start = query_start.data();
  batch.num_cached = num_cached.data();
  batch.block_tables = tables.data();
  batch.max_blocks_per_seq = blocks_per_seq;
  const bool decode = new_tokens == 1;
  Row r{decode ? "paged attention (decode)" : "paged attention (context, causal)",
        "batch " + std::to_string(num_seqs) + ", ctx " + std::to_string(cached + new_tokens) +
            (decode ? "" : " (" + std::to_string(new_tokens) + " new)") + ", 32/8 heads, d 128"};
  r.seconds = TimeMedian(
      [&] {
        cpu::PagedAttention(out.data(), q.data(), heads * head_dim, k.data(), v.data(), batch,
                            shape, heads, 1.0f / std::sqrt(static_cast<float>(head_dim)),
                            cpu::AttentionWindow{}, pool);
      },
      opt.min_time_s);
  // Keys and values each row attends to: positions [0, p] for the row at position p.
  double attended = 0;
  for (std::int32_t j = 0; j < new_tokens; ++j) attended += static_cast<double>(cached + j + 1);
  attended *= num_seqs;
  r.flops = 4.0 * static_cast<double>(heads * head_dim) * attended;
  // Decode reads each sequence's K and V once per kv head group; that is the traffic that matters.
  r.bytes = 2.0 * 4.0 * static_cast<double>(kv_heads * head_dim) * static_cast<double>(num_seqs) *
                static_cast<double>(cached + new_tokens) +
            8.0 * static_cast<double>(rows * heads * head_dim);
  r.memory_bound = decode;
  return r;
}

int Run(const Options& opt) {
  const int threads = opt.threads > 0
                          ? static_cast<int>(opt.threads)
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double copy_gbps =
      MeasureMemcpyGBps(static_cast<std::size_t>(opt.memcpy_mb) << 20, threads, 5);
  cpu::ThreadPool pool(threads);
  std::cout << "## CPU ops (" << threads << " threads)\n\nmemcpy: " << Fmt(copy_gbps, 1)
            << " GB/s (" << opt.memcpy_mb << " MiB, read+write counted, median of 5)\n\n";
  std::vector<Row> rows;
  rows.push_back(BenchLinear(&pool, opt, 1, 4096, 4096, DType::kFloat32));
  rows.push_back(BenchLinear(&pool, opt, 1, 4096, 4096, DType::kBFloat16));
  rows.push_back(BenchLinear(&pool, opt, 1, 4096, 14336, DType::kBFloat16));
  rows.push_back(BenchLinear(&pool, opt, 64, 4096, 4096, DType::kBFloat16));
  rows.push_back(BenchRmsNorm(opt, 1, 4096, false));
  rows.push_back(BenchRmsNorm(opt, 256, 4096, true));
  rows.push_back(BenchAttention(&pool, opt, 1, 511, 1));
  rows.push_back(BenchAttention(&pool, opt, 1, 4095, 1));
  rows.push_back(BenchAttention(&pool, opt, 8, 4095, 1));
  rows.push_back(BenchAttention(&pool, opt, 1, 0, 256));
  Table table({"op", "shape", "median us", "GB/s", "% of memcpy", "GFLOP/s", "bound"});
  for (const Row& r : rows) {
    const double gbps = r.bytes / r.seconds / 1e9;
    table.AddRow({r.op, r.shape, Fmt(r.seconds * 1e6, 1), Fmt(gbps, 2),
                  Fmt(100.0 * gbps / copy_gbps, 1) + "%", Fmt(r.flops / r.seconds / 1e9, 2),
                  r.memory_bound ? "memory" : "compute"});
  }
  table.Print(std::cout);
  std::cout << "\nGB/s = bytes the op must move (weights in their stored dtype, fp32 activations "
               "and KV) / median "
               "time. Compute-bound rows are judged by GFLOP/s, not by the memcpy column.\n";
  return 0;
}

}  // namespace
}  // namespace inflight::bench

int main(int argc, char** argv) {
  namespace tools = inflight::tools;
  inflight::bench::Options opt;
  tools::FlagSet flags(
      "inflight-bench-cpu-ops",
      "CPU reference ops: achieved GB/s and GFLOP/s next to memcpy bandwidth (markdown table).");
  flags.Add("threads", "N", "threads (default 0: all cores)", [&](const std::string& v) {
    return tools::ParseInt("--threads", v, 0, 1024, &opt.threads);
  });
  flags.Add("min_time", "S", "seconds per op at least (default 0.3)", [&](const std::string& v) {
    return tools::ParseDouble("--min_time", v, 0.0, 600.0, &opt.min_time_s);
  });
  flags.Add("memcpy_mb", "MiB", "memcpy buffer size (default 512)", [&](const std::string& v) {
    return tools::ParseInt("--memcpy_mb", v, 1, 1 << 16, &opt.memcpy_mb);
  });
  auto parsed = flags.Parse(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
    return 2;
  }
  if (!parsed.value()) return 0;
  return inflight::bench::Run(opt);
}
