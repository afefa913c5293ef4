// inflight-bench-pp: offline throughput of a pipeline-parallel engine on CPU ranks, with
// micro-batches in flight and without, beside the same model in one process (tp 1). Run under
// `mpirun -n <pp_size>`; rank 0 prints a markdown table:
//
//   mpirun -n 2 build/bench/inflight-bench-pp [--num_requests 16 --input_len 32 --output_len 64]
//
// Each run enqueues --num_requests greedy requests at once and times enqueue to the last final
// response; tokens/s counts output tokens. tp 1 runs on rank 0 while the other ranks wait asleep
// (not spinning, so they leave the cores to it). Every rank computes with --threads threads (1 by
// default, so that pp 2 on two ranks uses the cores tp 1 with two threads would). With perfect
// overlap a pipeline of N balanced stages gives up to N x the tp-1 figure; the stage holding the
// lm_head does more work than the others, which bounds it lower (the GPT-2 demo model's lm_head of
// 50257 x 256 outweighs its 4 layers).
//
// Shapes (--model): demo = the GPT-2 demo model's (tools/prepare_demo.sh: hidden 256, 4 layers of
// 4 heads, MLP 1024, vocabulary 50257), whose last stage does 0.9 of the whole model's work per
// token (the lm_head), so pp 2 can reach at most ~1.1x tp 1 there; balanced = GPT-2 with hidden
// 512, 8 layers of 8 heads, MLP 2048 and a vocabulary of 1024, where the layers dominate and the
// two stages do about the same work (up to ~2x).
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/flags.h"
#include "inflight/executor.h"
#include "model/checkpoint_converter.h"
#include "model/cpu_model_runner.h"
#include "model/leader_runner.h"
#include "model/mpi_collectives.h"
#include "model/mpi_load_report.h"
#include "model/mpi_step_channel.h"
#include "model/mpi_wait.h"
#include "model/random_checkpoint.h"
#include "table.h"

namespace fs = std::filesystem;

namespace inflight::bench {
namespace {

struct Options {
  std::string model = "demo";
  std::int64_t num_requests = 16;
  std::int64_t input_len = 32;
  std::int64_t output_len = 64;
  std::int64_t threads = 1;
  std::int64_t max_batch_size = 16;
};

struct Run {
  std::string name;
  double seconds = 0;
  std::int64_t tokens = 0;
};

int WorldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int WorldSize() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// A barrier that sleeps while it waits (MPI_Barrier spins a core, which rank 0 needs for tp 1).
void SleepyBarrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  (void)model::WaitForMpiRequests(&request, 1, std::nullopt, "the benchmark's barrier");
}

std::string ShareString(std::string s) {
  int n = static_cast<int>(s.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  s.resize(static_cast<std::size_t>(n));
  MPI_Bcast(s.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  return s;
}

model::RandomCheckpointOptions Checkpoint(const Options& o) {
  model::RandomCheckpointOptions c;
  c.arch = "gpt2";
  const bool demo = o.model == "demo";
  c.hidden_size = demo ? 256 : 512;
  c.num_layers = demo ? 4 : 8;
  c.num_heads = demo ? 4 : 8;
  c.num_kv_heads = c.num_heads;
  c.intermediate_size = demo ? 1024 : 2048;
  c.vocab_size = demo ? 50257 : 1024;
  c.max_position_embeddings = 1024;
  c.seed = 1;
  return c;
}

// Rank 0 writes the checkpoint and builds the tp-1 engine and the pp engine; "" on failure.
Status BuildEngines(const Options& o, const fs::path& root, std::int32_t pp) {
  const std::string ckpt = (root / "checkpoint").string();
  RETURN_IF_ERROR(model::WriteRandomCheckpoint(Checkpoint(o), ckpt).status());
  for (std::int32_t stages : {1, pp}) {
    model::BuildOptions b;
    b.checkpoint_dir = ckpt;
    b.output_dir = (root / ("pp" + std::to_string(stages))).string();
    b.dtype = DType::kFloat32;
    b.tokens_per_block = 64;
    b.pp_size = stages;
    b.max_batch_size = static_cast<std::int32_t>(o.max_batch_size);
    b.max_seq_len = 1024;
    RETURN_IF_ERROR(model::BuildEngine(b).status());
  }
  return Status::Ok();
}

std::vector<Request> Requests(const Options& o) {
  std::vector<Request> out;
  for (std::int64_t i = 0; i < o.num_requests; ++i) {
    Request r;
    for (std::int64_t t = 0; t < o.input_len; ++t) {
      r.input_token_ids.push_back(static_cast<TokenIdType>((i * 131 + t * 17) % 1000));
    }
    r.max_tokens = static_cast<SizeType>(o.output_len);
    r.output_config.exclude_input_from_output = true;
    out.push_back(std::move(r));
  }
  return out;
}

ExecutorConfig Config(const Options& o, bool micro_batching) {
  ExecutorConfig c;
  c.enable_micro_batching = micro_batching;
  c.max_batch_size = static_cast<SizeType>(o.max_batch_size);
  c.kv_cache_config.enable_block_reuse = false;  // every request computes its whole prompt
  c.scheduler_config.enable_chunked_context = true;
  return c;
}

// Enqueues every request and waits for the last final response (rank 0).
Result<Run> Time(Executor& ex, const Options& o, std::string name) {
  const std::vector<Request> reqs = Requests(o);
  Run run;
  run.name = std::move(name);
  const double start = NowSeconds();
  for (const Request& r : reqs) RETURN_IF_ERROR(ex.enqueueRequest(r).status());
  std::size_t finals = 0;
  while (finals < reqs.size()) {
    for (const Response& r : ex.awaitResponses(std::chrono::milliseconds(500))) {
      if (r.hasError()) return *r.error;
      if (!r.result.output_token_ids.empty()) {
        run.tokens += static_cast<std::int64_t>(r.result.output_token_ids.front().size());
      }
      if (r.isFinal()) ++finals;
    }
  }
  run.seconds = NowSeconds() - start;
  return run;
}

Result<Run> RunWhole(const Options& o, const std::string& engine_dir) {
  model::RunnerOptions ro;
  ro.max_kv_tokens = o.max_batch_size * (o.input_len + o.output_len + 64);
  ro.num_threads = static_cast<int>(o.threads);
  ASSIGN_OR_RETURN(auto runner, model::CreateCpuModelRunner(engine_dir, ro));
  ASSIGN_OR_RETURN(auto ex, Executor::CreateWithRunner(Config(o, false), std::move(runner)));
  return Time(*ex, o, "tp 1 (one process)");
}

// Every rank: the pp engine in leader mode; rank 0 returns the timing, the others a zero Run.
Result<Run> RunPipeline(const Options& o, const std::string& engine_dir, bool micro_batching) {
  const std::int32_t pp = WorldSize();
  ASSIGN_OR_RETURN(auto collectives, model::CreateMpiCollectives(MPI_COMM_WORLD, 1, pp));
  model::RunnerOptions ro;
  ro.max_kv_tokens = o.max_batch_size * (o.input_len + o.output_len + 64);
  ro.num_threads = static_cast<int>(o.threads);
  ro.collectives = collectives;
  ASSIGN_OR_RETURN(auto runner, model::CreateCpuModelRunner(engine_dir, ro));
  ASSIGN_OR_RETURN(std::int64_t blocks,
                   model::GatherLoadResults(MPI_COMM_WORLD, runner->num_kv_blocks()));
  MPI_Comm step_comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &step_comm);
  auto channel = std::make_unique<model::MpiStepChannel>(step_comm, std::chrono::seconds(600));
  if (WorldRank() != 0) {
    RETURN_IF_ERROR(model::RunFollower(runner.get(), *channel));
    return Run{};
  }
  auto leader =
      std::make_unique<model::LeaderRunner>(std::move(runner), std::move(channel), blocks);
  ASSIGN_OR_RETURN(auto ex,
                   Executor::CreateWithRunner(Config(o, micro_batching), std::move(leader)));
  return Time(*ex, o,
              "pp " + std::to_string(pp) +
                  (micro_batching ? ", micro-batches in flight" : ", one step at a time"));
}

int Main(int argc, char** argv) {
  Options o;
  tools::FlagSet flags("inflight-bench-pp",
                       "Pipeline-parallel CPU throughput with and without micro-batches in "
                       "flight, beside tp 1. Run under mpirun -n <pp_size>.");
  flags.Add("model", "NAME", "demo (default: the GPT-2 demo model's shape) | balanced",
            [&](const std::string& v) {
              return tools::ParseChoice("--model", v, {"demo", "balanced"}, &o.model);
            });
  flags.Add("num_requests", "N", "requests enqueued at once (default 16)",
            [&](const std::string& v) {
              return tools::ParseInt("--num_requests", v, 1, 4096, &o.num_requests);
            });
  flags.Add("input_len", "N", "prompt tokens (default 32)", [&](const std::string& v) {
    return tools::ParseInt("--input_len", v, 1, 512, &o.input_len);
  });
  flags.Add("output_len", "N", "output tokens per request (default 64)", [&](const std::string& v) {
    return tools::ParseInt("--output_len", v, 1, 512, &o.output_len);
  });
  flags.Add("threads", "N", "compute threads per rank (default 1)", [&](const std::string& v) {
    return tools::ParseInt("--threads", v, 1, 256, &o.threads);
  });
  flags.Add("max_batch_size", "N", "running requests at once (default 16)",
            [&](const std::string& v) {
              return tools::ParseInt("--max_batch_size", v, 1, 4096, &o.max_batch_size);
            });
  const int rank = WorldRank();
  auto parsed = flags.Parse(argc, argv);
  if (!parsed.ok()) {
    if (rank == 0) std::cerr << parsed.status().message() << "\n";
    return 2;
  }
  if (!parsed.value()) return 0;
  const std::int32_t pp = WorldSize();
  if (pp < 2) {
    std::cerr << "inflight-bench-pp: run it under mpirun -n <pp_size>, pp_size >= 2 (the world "
                 "size is 1)\n";
    return 2;
  }

  const fs::path root =
      fs::temp_directory_path() / ("inflight_bench_pp_" + std::to_string(getpid()));
  std::string dir;
  if (rank == 0) {
    const Status built = BuildEngines(o, root, pp);
    if (built.ok()) {
      dir = root.string();
    } else {
      std::cerr << "building the engines: " << built.ToString() << "\n";
    }
  }
  dir = ShareString(dir);
  if (dir.empty()) return 1;

  std::vector<Run> runs;
  int status = 0;
  auto keep = [&](Result<Run> run) {
    if (!run.ok()) {
      std::cerr << "rank " << rank << ": " << run.status().ToString() << "\n";
      status = 1;
    } else if (rank == 0) {
      runs.push_back(*run);
      std::fprintf(stderr, "%s: %.2f s\n", run->name.c_str(), run->seconds);
    }
  };
  if (rank == 0) keep(RunWhole(o, (fs::path(dir) / "pp1").string()));
  SleepyBarrier();
  const std::string pp_dir = (fs::path(dir) / ("pp" + std::to_string(pp))).string();
  keep(RunPipeline(o, pp_dir, true));
  SleepyBarrier();
  keep(RunPipeline(o, pp_dir, false));
  SleepyBarrier();

  if (rank == 0) {
    std::error_code ec;
    fs::remove_all(root, ec);
    std::cout << "model " << o.model << " (vocabulary " << *Checkpoint(o).vocab_size << "), "
              << o.num_requests << " requests of " << o.input_len << " + " << o.output_len
              << " tokens, max_batch_size " << o.max_batch_size << ", " << o.threads
              << " thread(s) per rank, " << pp << " ranks\n\n";
    Table table({"configuration", "output tokens", "seconds", "tokens/s", "vs tp 1"});
    const double base = runs.empty() ? 0 : runs.front().tokens / runs.front().seconds;
    for (const Run& r : runs) {
      const double rate = r.tokens / r.seconds;
      table.AddRow({r.name, std::to_string(r.tokens), Fmt(r.seconds, 2), Fmt(rate, 1),
                    base > 0 ? Fmt(rate / base, 2) + "x" : "-"});
    }
    table.Print(std::cout);
  }
  return status;
}

}  // namespace
}  // namespace inflight::bench

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  // The executor steps the runner on a thread of its own (mpi_collectives.h).
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const int status = inflight::bench::Main(argc, argv);
  MPI_Finalize();
  return status;
}
