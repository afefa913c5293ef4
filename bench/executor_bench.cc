// inflight-bench-executor: the executor without a server. Sections (--sections, run in the order
// given):
//
//   decode      batch-1 decode: the median step time next to its floor, (weight bytes + KV bytes
//               read per step) / bandwidth, with the bandwidth given (--bandwidth_gbps) or measured
//               in the same run: the card's device-to-device copy when the model runs on a GPU
//               (as inflight-bench-gpu-ceilings measures it), else host memcpy;
//   throughput  offline throughput per input/output shape: --num_requests requests enqueued at once
//               (in-flight batching, chunked context), output tokens/s, TTFT and TPOT, next to
//               TensorRT-LLM's published Llama-3.1-8B FP16 H100 figures (perf-anchors.md); each
//               shape's row is printed when that shape finishes;
//   latency     per-request latency (enqueue to final response) at each --latency_concurrency,
//               closed loop: what bench/server_overhead.py compares with the same requests sent
//               through inflight-server;
//   prefill     --prefill_requests prompts of --prefill_len tokens with one output token each: the
//               model's FLOPs per wall second next to the card's GEMM rate (--gemm_tflops).
//
// The engine is --engine_dir, or random weights written straight into an engine in a temporary
// folder (--preset tiny | small | llama-3.1-8b, quantized with --qformat / --kv_cache_dtype as
// inflight-build would; random_bench_engine.h). On a CPU only tiny or small finish in seconds.
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/flags.h"
#include "executor_bench_floors.h"
#include "inflight/executor.h"
#include "model/engine_config.h"
#include "random_bench_engine.h"
#include "table.h"

namespace fs = std::filesystem;

namespace inflight::bench {
namespace {

struct Shape {
  SizeType input_len = 0;
  SizeType output_len = 0;
};

// TensorRT-LLM v0.13 perf-overview, Llama-3.1-8B FP16 on one H100, output tokens/s
// (perf-anchors.md).
const std::map<std::pair<int, int>, double> kTrtLlmFp16H100 = {
    {{128, 128}, 15648},  {{128, 2048}, 8883}, {{2048, 128}, 1859},
    {{2048, 2048}, 4152}, {{500, 2000}, 6835}, {{1000, 1000}, 7161}};
// TensorRT-LLM v1.0 perf-overview, Llama-3.1-8B FP8 on one H100 (issue 24's targets).
const std::map<std::pair<int, int>, double> kTrtLlmFp8H100 = {
    {{128, 128}, 28312}, {{128, 2048}, 22714}, {{2048, 128}, 3450}, {{2048, 2048}, 9305}};

struct Options {
  std::string engine_dir;
  RandomEngineOptions engine;  // without --engine_dir
  std::string shapes = "128/128,128/2048,2048/128,2048/2048";
  std::int64_t num_requests = 8;
  std::int64_t decode_steps = 64;
  std::int64_t decode_context = 128;
  double bandwidth_gbps = 0;
  bool keep_engine = false;
  std::string sections = "decode,throughput";
  std::string latency_concurrency = "1,8";
  std::string latency_shape = "128/64";
  std::int64_t latency_requests = 24;
  bool kv_cache_reuse = true;
  std::optional<bool> busy_poll;    // ExecutorConfig::busy_poll; unset: auto
  double kv_fraction = 0.9;         // the executor's default; TensorRT-LLM's table ran at 0.99
  std::int64_t max_batch_size = 0;  // ExecutorConfig::max_batch_size; 0: the engine's
  std::int64_t prefill_len = 2048;
  std::int64_t prefill_requests = 32;
  double gemm_tflops = 0;  // the card's measured bf16 GEMM rate, for the prefill row's ratio
};

// The sections to run, in the order given (a round puts the short ones before throughput, so a
// deadline cuts only the long shapes).
Result<std::vector<std::string>> ParseSections(const std::string& text) {
  std::vector<std::string> sections;
  for (const std::string& item : tools::SplitCommas(text)) {
    std::string name;
    RETURN_IF_ERROR(tools::ParseChoice("--sections", item,
                                       {"decode", "throughput", "latency", "prefill"}, &name));
    if (std::find(sections.begin(), sections.end(), name) != sections.end()) {
      return InvalidArgument("--sections names \"" + name + "\" twice");
    }
    sections.push_back(name);
  }
  return sections;
}

Result<std::vector<std::int64_t>> ParseConcurrencies(const std::string& text) {
  std::vector<std::int64_t> out;
  RETURN_IF_ERROR(tools::ParseIntList("--latency_concurrency", text, 1, 4096, &out));
  return out;
}

Result<std::vector<Shape>> ParseShapes(const std::string& text) {
  std::vector<Shape> shapes;
  for (const std::string& item : tools::SplitCommas(text)) {
    Shape s;
    char slash = 0;
    std::stringstream one(item);
    if (!(one >> s.input_len >> slash >> s.output_len) || slash != '/' || s.input_len < 1 ||
        s.output_len < 1 || !one.eof()) {
      return InvalidArgument("--shapes item \"" + item +
                             "\" is not <input_len>/<output_len> with both >= 1 (e.g. 128/2048)");
    }
    shapes.push_back(s);
  }
  return shapes;
}

Result<std::string> MakeEngine(const Options& opt, const std::vector<Shape>& shapes,
                               const fs::path& work) {
  SizeType max_input = static_cast<SizeType>(opt.decode_context);
  SizeType max_seq = static_cast<SizeType>(opt.decode_context + opt.decode_steps + 1);
  for (const Shape& s : shapes) {
    max_input = std::max(max_input, s.input_len);
    max_seq = std::max(max_seq, s.input_len + s.output_len);
  }
  return WriteRandomBenchEngine(opt.engine, max_input, max_seq, work);
}

VecTokens RandomPrompt(SizeType length, SizeType vocab, std::uint64_t seed) {
  VecTokens ids(static_cast<std::size_t>(length));
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& id : ids) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    id = static_cast<TokenIdType>(1 + x % static_cast<std::uint64_t>(std::max(2, vocab) - 1));
  }
  return ids;
}

struct DecodeResult {
  double step_ms_median = 0;   // from the executor's iteration stats (generation-only steps)
  double token_ms_median = 0;  // between streamed tokens, as a client sees it
  std::int64_t steps = 0;
};

Result<DecodeResult> MeasureDecode(Executor& ex, const Options& opt) {
  Request req;
  req.input_token_ids = RandomPrompt(static_cast<SizeType>(opt.decode_context), ex.vocabSize(), 7);
  req.max_tokens = static_cast<SizeType>(opt.decode_steps);
  req.streaming = true;
  (void)ex.getLatestIterationStats();  // drop earlier iterations
  ASSIGN_OR_RETURN(IdType id, ex.enqueueRequest(req));
  std::vector<double> token_times;
  bool done = false;
  while (!done) {
    for (const Response& r : ex.awaitResponses(id, std::chrono::milliseconds(60000))) {
      if (r.hasError()) return r.error.value();
      if (!r.result.output_token_ids.empty() && !r.result.output_token_ids[0].empty()) {
        token_times.push_back(NowSeconds());
      }
      done = done || r.isFinal();
    }
  }
  DecodeResult out;
  std::vector<double> gaps;
  for (std::size_t i = 1; i < token_times.size(); ++i)
    gaps.push_back((token_times[i] - token_times[i - 1]) * 1e3);
  out.token_ms_median = Median(gaps);
  std::vector<double> steps;
  for (const IterationStats& s : ex.getLatestIterationStats()) {
    if (s.num_gen_requests == 1 && s.num_context_requests == 0) steps.push_back(s.iter_latency_ms);
  }
  out.steps = static_cast<std::int64_t>(steps.size());
  out.step_ms_median = Median(steps);
  return out;
}

struct ThroughputResult {
  double seconds = 0;
  std::int64_t output_tokens = 0;
  std::vector<double> ttft_ms, tpot_ms;
};

// Prompts are unique per (shape, request): a repeated prompt would hit the prefix cache and flatter
// TTFT.
Result<ThroughputResult> MeasureThroughput(Executor& ex, const Shape& shape,
                                           std::int64_t num_requests, std::uint64_t seed_base) {
  std::vector<Request> requests;
  for (std::int64_t i = 0; i < num_requests; ++i) {
    Request r;
    r.input_token_ids =
        RandomPrompt(shape.input_len, ex.vocabSize(), seed_base + static_cast<std::uint64_t>(i));
    r.max_tokens = shape.output_len;
    r.output_config.exclude_input_from_output = true;
    requests.push_back(std::move(r));
  }
  ThroughputResult out;
  const double t0 = NowSeconds();
  for (auto& id : ex.enqueueRequests(requests)) RETURN_IF_ERROR(id.status());
  std::int64_t finished = 0;
  while (finished < num_requests) {
    for (const Response& r : ex.awaitResponses(std::chrono::milliseconds(60000))) {
      if (r.hasError()) return r.error.value();
      if (!r.isFinal()) continue;
      ++finished;
      const ResponseResult& res = r.result;
      const auto n = static_cast<std::int64_t>(
          res.output_token_ids.empty() ? 0 : res.output_token_ids[0].size());
      out.output_tokens += n;
      out.ttft_ms.push_back(static_cast<double>(res.first_token_time_ns - res.arrival_time_ns) /
                            1e6);
      if (n > 1) {
        out.tpot_ms.push_back(
            static_cast<double>(res.last_token_time_ns - res.first_token_time_ns) / 1e6 /
            static_cast<double>(n - 1));
      }
    }
  }
  out.seconds = NowSeconds() - t0;
  return out;
}

struct LatencyResult {
  std::vector<double> latency_ms, ttft_ms;
  std::int64_t output_tokens = 0;
  double seconds = 0;
};

// Closed loop: `concurrency` requests in flight, the next enqueued as soon as one finishes (what
// benchmark_core_model.py's --concurrency workers do over HTTP). Latency = enqueueRequest to the
// final response leaving awaitResponses, as a client of the executor sees it.
Result<LatencyResult> MeasureLatency(Executor& ex, const Shape& shape, std::int64_t concurrency,
                                     std::int64_t num_requests, std::uint64_t seed_base) {
  LatencyResult out;
  std::map<IdType, double> started;
  std::int64_t next = 0, finished = 0;
  auto submit = [&]() -> Status {
    Request r;
    r.input_token_ids =
        RandomPrompt(shape.input_len, ex.vocabSize(), seed_base + static_cast<std::uint64_t>(next));
    r.max_tokens = shape.output_len;
    r.output_config.exclude_input_from_output = true;
    const double t = NowSeconds();
    ASSIGN_OR_RETURN(IdType id, ex.enqueueRequest(r));
    started[id] = t;
    ++next;
    return Status::Ok();
  };
  const double t0 = NowSeconds();
  while (next < std::min(concurrency, num_requests)) RETURN_IF_ERROR(submit());
  double last_progress = t0;
  while (finished < num_requests) {
    const std::vector<Response> responses = ex.awaitResponses(std::chrono::milliseconds(1000));
    const double now = NowSeconds();
    for (const Response& r : responses) {
      if (r.hasError()) return r.error.value();
      if (!r.isFinal()) continue;
      auto it = started.find(r.request_id);
      if (it == started.end()) continue;
      out.latency_ms.push_back((now - it->second) * 1e3);
      started.erase(it);
      ++finished;
      last_progress = now;
      const ResponseResult& res = r.result;
      out.output_tokens += static_cast<std::int64_t>(
          res.output_token_ids.empty() ? 0 : res.output_token_ids[0].size());
      out.ttft_ms.push_back(static_cast<double>(res.first_token_time_ns - res.arrival_time_ns) /
                            1e6);
      if (next < num_requests) RETURN_IF_ERROR(submit());
    }
    if (now - last_progress > 600) {
      return Unavailable("latency: no request finished in 600 s (" + std::to_string(finished) +
                         " of " + std::to_string(num_requests) + " done)");
    }
  }
  out.seconds = NowSeconds() - t0;
  return out;
}

Status RunLatency(Executor& ex, const Options& opt) {
  ASSIGN_OR_RETURN(std::vector<Shape> one, ParseShapes(opt.latency_shape));
  if (one.size() != 1) return InvalidArgument("--latency_shape names one shape, e.g. 128/64");
  const Shape shape = one[0];
  ASSIGN_OR_RETURN(std::vector<std::int64_t> concurrencies,
                   ParseConcurrencies(opt.latency_concurrency));
  std::cout << "## Request latency (" << shape.input_len << "/" << shape.output_len << ", "
            << opt.latency_requests << " requests per concurrency, closed loop)\n\n";
  // Warm-up outside the timing, one request per concurrency level's first batch.
  RETURN_IF_ERROR(MeasureLatency(ex, shape, 1, 2, 500000).status());
  StreamingTable table({"concurrency", "in/out", "requests", "p50 ms", "p90 ms", "p99 ms",
                        "mean ms", "TTFT p50 ms", "output tok/s"},
                       std::cout);
  std::vector<std::string> machine_lines;
  std::uint64_t seed_base = 600000;
  for (std::int64_t c : concurrencies) {
    ASSIGN_OR_RETURN(LatencyResult r,
                     MeasureLatency(ex, shape, c, opt.latency_requests, seed_base));
    seed_base += static_cast<std::uint64_t>(opt.latency_requests);
    double sum = 0;
    for (double v : r.latency_ms) sum += v;
    const double p50 = Percentile(r.latency_ms, 0.5), p90 = Percentile(r.latency_ms, 0.9),
                 p99 = Percentile(r.latency_ms, 0.99);
    table.AddRow({std::to_string(c), opt.latency_shape, std::to_string(opt.latency_requests),
                  Fmt(p50, 3), Fmt(p90, 3), Fmt(p99, 3),
                  Fmt(sum / static_cast<double>(r.latency_ms.size()), 3),
                  Fmt(Percentile(r.ttft_ms, 0.5), 3),
                  Fmt(static_cast<double>(r.output_tokens) / r.seconds, 1)});
    char line[256];
    std::snprintf(line, sizeof(line),
                  "latency: concurrency=%lld shape=%s requests=%lld p50_ms=%.4f p90_ms=%.4f "
                  "p99_ms=%.4f",
                  static_cast<long long>(c), opt.latency_shape.c_str(),
                  static_cast<long long>(opt.latency_requests), p50, p90, p99);
    machine_lines.emplace_back(line);
  }
  std::cout << "\nLatency: enqueueRequest to the final response returned by awaitResponses "
               "(non-streaming), nearest-rank percentiles; the next request is enqueued when one "
               "finishes.\n\n";
  for (const std::string& l : machine_lines) std::cout << l << "\n";
  std::cout << "\n" << std::flush;
  return Status::Ok();
}

Status RunDecode(Executor& ex, const Options& opt, const std::string& engine_dir,
                 const model::EngineConfig& cfg, const std::optional<FloorBandwidth>& device_copy) {
  const bool on_gpu = ex.deviceName() != "cpu";
  const FloorBandwidth floor_bandwidth =
      DecodeFloorBandwidth(opt.bandwidth_gbps, on_gpu, device_copy);
  const double bandwidth = floor_bandwidth.gbps;
  ASSIGN_OR_RETURN(DecodeResult decode, MeasureDecode(ex, opt));
  const std::int64_t weight_bytes = WeightBytesPerStep(engine_dir, cfg);
  const double mean_context =
      static_cast<double>(opt.decode_context) + static_cast<double>(opt.decode_steps) / 2.0;
  const std::int64_t kv_value_bytes =
      cfg.quant.kv_cache_fp8 ? 1 : (on_gpu ? static_cast<std::int64_t>(DTypeSize(cfg.dtype)) : 4);
  const std::int64_t kv_bytes = KvBytes(cfg, mean_context, kv_value_bytes);
  const double floor_ms = static_cast<double>(weight_bytes + kv_bytes) / (bandwidth * 1e9) * 1e3;
  std::cout << "## Batch-1 decode (prompt " << opt.decode_context << ", " << opt.decode_steps
            << " new tokens)\n\n";
  Table dt({"weight MB/step", "KV MB/step (mean ctx)", "bandwidth GB/s", "floor ms",
            "median step ms", "median token gap ms", "step / floor", "tok/s"});
  dt.AddRow({Fmt(static_cast<double>(weight_bytes) / 1e6, 2),
             Fmt(static_cast<double>(kv_bytes) / 1e6, 3), Fmt(bandwidth, 1), Fmt(floor_ms, 4),
             Fmt(decode.step_ms_median, 4), Fmt(decode.token_ms_median, 4),
             Fmt(decode.step_ms_median / floor_ms, 2) + "x",
             Fmt(decode.token_ms_median > 0 ? 1e3 / decode.token_ms_median : 0, 1)});
  dt.Print(std::cout);
  std::cout << "\nBandwidth: " << floor_bandwidth.source << ". Median over " << decode.steps
            << " generation-only iterations (executor iteration stats).\n\n"
            << std::flush;
  return Status::Ok();
}

// Prefill alone: --prefill_requests prompts of --prefill_len tokens and one output token each,
// enqueued at once, so every step is a full chunk of prompt tokens.
Status RunPrefill(Executor& ex, const Options& opt, const model::EngineConfig& cfg) {
  const Shape shape{static_cast<SizeType>(opt.prefill_len), 1};
  std::cout << "## Prefill (" << opt.prefill_requests << " prompts of " << opt.prefill_len
            << " tokens, 1 output token each, enqueued at once)\n\n";
  RETURN_IF_ERROR(MeasureThroughput(ex, shape, 2, 700000).status());  // warm-up
  ASSIGN_OR_RETURN(ThroughputResult r, MeasureThroughput(ex, shape, opt.prefill_requests, 710000));
  const double tokens = static_cast<double>(opt.prefill_requests * opt.prefill_len);
  const double tflops = static_cast<double>(opt.prefill_requests) *
                        PrefillFlops(cfg, opt.prefill_len) / r.seconds / 1e12;
  Table t({"prompt tokens", "wall s", "prompt tok/s", "TFLOP/s", "GEMM rate TFLOP/s",
           "% of GEMM rate"});
  t.AddRow({Fmt(tokens, 0), Fmt(r.seconds, 3), Fmt(tokens / r.seconds, 1), Fmt(tflops, 1),
            opt.gemm_tflops > 0 ? Fmt(opt.gemm_tflops, 1) : "-",
            opt.gemm_tflops > 0 ? Fmt(100.0 * tflops / opt.gemm_tflops, 1) + "%" : "-"});
  t.Print(std::cout);
  std::cout << "\nTFLOP/s: dense layers for every prompt token, causal attention and lm_head for "
               "the last row, over the wall time from enqueue to the last response. GEMM rate: "
               "--gemm_tflops (the ceilings benchmark's bf16 8192^3 rate on this card).\n\n"
            << std::flush;
  return Status::Ok();
}

Status RunThroughput(Executor& ex, const Options& opt, const std::vector<Shape>& shapes,
                     const model::EngineConfig& cfg) {
  // An FP8 engine is compared with TensorRT-LLM's FP8 row, anything else with its FP16 one.
  const bool fp8 = cfg.quant.quant_algo == model::QuantAlgo::kFp8;
  const auto& reference = fp8 ? kTrtLlmFp8H100 : kTrtLlmFp16H100;
  std::cout << "## Offline throughput (" << opt.num_requests << " requests enqueued at once; "
            << DescribeQuantization(cfg.quant) << ")\n\n";
  StreamingTable tt(
      {"in/out", "requests", "output tok/s", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "wall s",
       fp8 ? "TRT-LLM FP8 H100 tok/s (ref)" : "TRT-LLM FP16 H100 tok/s (ref)"},
      std::cout);
  std::uint64_t seed_base = 1000;
  for (const Shape& s : shapes) {
    ASSIGN_OR_RETURN(ThroughputResult r, MeasureThroughput(ex, s, opt.num_requests, seed_base));
    seed_base += static_cast<std::uint64_t>(opt.num_requests);
    auto ref = reference.find({s.input_len, s.output_len});
    tt.AddRow({std::to_string(s.input_len) + "/" + std::to_string(s.output_len),
               std::to_string(opt.num_requests),
               Fmt(static_cast<double>(r.output_tokens) / r.seconds, 1),
               Fmt(Percentile(r.ttft_ms, 0.5), 2), Fmt(Percentile(r.ttft_ms, 0.99), 2),
               Fmt(Percentile(r.tpot_ms, 0.5), 3), Fmt(r.seconds, 2),
               ref == reference.end() ? "-" : Fmt(ref->second, 0)});
  }
  std::cout << "\nThe reference column is Llama-3.1-8B "
            << (fp8 ? "FP8 on an H100 (trtllm-bench, v1.0)"
                    : "FP16 on an H100 (trtllm-bench, v0.13)")
            << ": compare only a llama-3.1-8b engine on an H100 with it.\n\n"
            << std::flush;
  return Status::Ok();
}

Status Run(const Options& opt) {
  ASSIGN_OR_RETURN(const std::vector<std::string> sections, ParseSections(opt.sections));
  const bool latency = std::find(sections.begin(), sections.end(), "latency") != sections.end();
  ASSIGN_OR_RETURN(const std::vector<Shape> shapes, ParseShapes(opt.shapes));
  std::vector<Shape> engine_shapes = shapes;  // what a random engine must hold
  if (latency) {
    ASSIGN_OR_RETURN(std::vector<Shape> latency_shape, ParseShapes(opt.latency_shape));
    RETURN_IF_ERROR(ParseConcurrencies(opt.latency_concurrency).status());
    engine_shapes.insert(engine_shapes.end(), latency_shape.begin(), latency_shape.end());
  }
  if (std::find(sections.begin(), sections.end(), "prefill") != sections.end()) {
    engine_shapes.push_back(Shape{static_cast<SizeType>(opt.prefill_len), 1});
  }
  fs::path work;
  std::string engine_dir = opt.engine_dir;
  if (engine_dir.empty()) {
    work = fs::temp_directory_path() /
           ("inflight-bench-" + opt.engine.preset + "-" + std::to_string(::getpid()));
    fs::create_directories(work);
    ASSIGN_OR_RETURN(engine_dir, MakeEngine(opt, engine_shapes, work));
  }
  ASSIGN_OR_RETURN(model::EngineConfig cfg, model::LoadEngineConfig(engine_dir));

  ExecutorConfig config;
  config.scheduler_config.enable_chunked_context = true;
  config.kv_cache_config.enable_block_reuse = opt.kv_cache_reuse;
  config.busy_poll = opt.busy_poll;
  config.kv_cache_config.free_gpu_memory_fraction = static_cast<float>(opt.kv_fraction);
  if (opt.max_batch_size > 0) config.max_batch_size = static_cast<SizeType>(opt.max_batch_size);
  config.iter_stats_max_iterations = 100000;
  // The decode floor's copy rate, while the card's memory is still free.
  const bool decode = std::find(sections.begin(), sections.end(), "decode") != sections.end();
  const std::optional<FloorBandwidth> device_copy =
      decode && opt.bandwidth_gbps <= 0 ? MeasureDeviceCopy() : std::nullopt;
  const double load_start = NowSeconds();
  ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::Create(engine_dir, config));
  const double load_seconds = NowSeconds() - load_start;

  std::cout << "## Engine\n\n"
            << cfg.architecture_name << ", " << DTypeName(cfg.dtype) << ", hidden "
            << cfg.hidden_size << ", " << cfg.num_layers << " layers, " << cfg.num_attention_heads
            << "/" << cfg.num_kv_heads << " heads, head dim " << cfg.head_dim << ", intermediate "
            << cfg.intermediate_size << ", vocab " << cfg.vocab_size << "; quantization "
            << DescribeQuantization(cfg.quant) << "; on " << ex->deviceName() << "; max_batch_size "
            << ex->maxBatchSize() << ", max_num_tokens " << cfg.build.max_num_tokens
            << ", chunked context on, KV cache reuse " << (opt.kv_cache_reuse ? "on" : "off")
            << ", KV fraction " << Fmt(opt.kv_fraction, 2) << "; loaded in " << Fmt(load_seconds, 1)
            << " s\n\n"
            << std::flush;

  for (const std::string& section : sections) {
    if (section == "decode") RETURN_IF_ERROR(RunDecode(*ex, opt, engine_dir, cfg, device_copy));
    if (section == "throughput") RETURN_IF_ERROR(RunThroughput(*ex, opt, shapes, cfg));
    if (section == "latency") RETURN_IF_ERROR(RunLatency(*ex, opt));
    if (section == "prefill") RETURN_IF_ERROR(RunPrefill(*ex, opt, cfg));
  }
  ex->shutdown();
  if (!work.empty() && !opt.keep_engine) fs::remove_all(work);
  return Status::Ok();
}

}  // namespace
}  // namespace inflight::bench

int main(int argc, char** argv) {
  using inflight::Status;
  namespace tools = inflight::tools;
  inflight::bench::Options opt;
  tools::FlagSet flags(
      "inflight-bench-executor",
      "Executor benchmark without a server: batch-1 decode vs the memory floor, TTFT, TPOT "
      "and offline throughput. Prints markdown tables.");
  flags.AddString("engine_dir", "DIR",
                  "engine to load (default: build one from --preset in a temp folder)",
                  &opt.engine_dir);
  inflight::bench::AddRandomEngineFlags(&flags, &opt.engine);
  flags.AddString("shapes", "LIST",
                  "input/output lengths (default 128/128,128/2048,2048/128,2048/2048)",
                  &opt.shapes);
  flags.Add("num_requests", "N",
            "requests per shape, all enqueued at once (default 8; use 1000+ on a GPU)",
            [&](const std::string& v) {
              return tools::ParseInt("--num_requests", v, 1, 1 << 20, &opt.num_requests);
            });
  flags.Add("decode_steps", "N", "batch-1 decode: new tokens (default 64)",
            [&](const std::string& v) {
              return tools::ParseInt("--decode_steps", v, 2, 1 << 20, &opt.decode_steps);
            });
  flags.Add("decode_context", "N", "batch-1 decode: prompt length (default 128)",
            [&](const std::string& v) {
              return tools::ParseInt("--decode_context", v, 1, 1 << 20, &opt.decode_context);
            });
  flags.Add("bandwidth_gbps", "GB/s",
            "bandwidth for the decode floor (default: measured, device copy on a GPU)",
            [&](const std::string& v) {
              return tools::ParseDouble("--bandwidth_gbps", v, 1e-3, 1e6, &opt.bandwidth_gbps);
            });
  flags.AddSwitch("keep_engine", "keep the temporary engine", &opt.keep_engine);
  flags.AddString("sections", "LIST",
                  "what to run, in the order given: decode, throughput, latency, prefill (default "
                  "decode,throughput)",
                  &opt.sections);
  flags.AddString("latency_concurrency", "LIST",
                  "latency: requests in flight, one row each (default 1,8)",
                  &opt.latency_concurrency);
  flags.AddString("latency_shape", "IN/OUT", "latency: prompt and output length (default 128/64)",
                  &opt.latency_shape);
  flags.Add("latency_requests", "N", "latency: requests per concurrency (default 24)",
            [&](const std::string& v) {
              return tools::ParseInt("--latency_requests", v, 1, 1 << 20, &opt.latency_requests);
            });
  flags.AddSwitch("kv_cache_reuse",
                  "prefix reuse of KV blocks (default true; =false to match a server "
                  "configured without it)",
                  &opt.kv_cache_reuse);
  flags.Add(
      "busy_poll", "auto|true|false",
      "how threads wait for responses and work (ExecutorConfig::busy_poll; default auto: "
      "spin on a GPU, sleep on the CPU)",
      [&](const std::string& v) -> Status {
        std::string choice;
        RETURN_IF_ERROR(tools::ParseChoice("--busy_poll", v, {"auto", "true", "false"}, &choice));
        opt.busy_poll = choice == "auto" ? std::nullopt : std::optional<bool>(choice == "true");
        return Status::Ok();
      });
  flags.Add("prefill_len", "N", "prefill: prompt length (default 2048)", [&](const std::string& v) {
    return tools::ParseInt("--prefill_len", v, 1, 1 << 20, &opt.prefill_len);
  });
  flags.Add("prefill_requests", "N", "prefill: prompts (default 32)", [&](const std::string& v) {
    return tools::ParseInt("--prefill_requests", v, 1, 1 << 20, &opt.prefill_requests);
  });
  flags.Add("gemm_tflops", "TFLOP/s", "prefill: the card's bf16 GEMM rate, for the ratio",
            [&](const std::string& v) {
              return tools::ParseDouble("--gemm_tflops", v, 1e-3, 1e6, &opt.gemm_tflops);
            });
  flags.Add("executor_max_batch_size", "N",
            "the executor's max_batch_size (default: the engine's; at most the engine's), so "
            "one engine compares batch limits",
            [&](const std::string& v) {
              return tools::ParseInt("--executor_max_batch_size", v, 1, 1 << 20,
                                     &opt.max_batch_size);
            });
  flags.Add("kv_cache_free_gpu_mem_fraction", "F",
            "share of the GPU memory free after weights that the KV cache takes (default 0.9)",
            [&](const std::string& v) {
              return tools::ParseDouble("--kv_cache_free_gpu_mem_fraction", v, 1e-3, 1.0,
                                        &opt.kv_fraction);
            });
  return flags.ParseAndRun(argc, argv, [&]() -> Status {
    RETURN_IF_ERROR(inflight::bench::CheckEngineDirFlags(flags));
    return inflight::bench::Run(opt);
  });
}
