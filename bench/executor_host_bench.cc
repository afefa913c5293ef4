// inflight-bench-executor-host: the executor's own time a step, which the device waits for between
// decode steps (0.6-0.8 ms of a 20.6 ms FP8 decode step of 1,024 sequences on an H200,
// bench/NOTES.md entry 23). The model is a runner that "samples on the device" instantly: every
// sequence's next token comes back without computing anything, so the wall time is the scheduler,
// the step inputs, the device-sampling inputs, the outputs and the responses alone. Run with
// INFLIGHT_STEP_PROFILE=64 for the executor's split of each step into those phases.
//
//   inflight-bench-executor-host [--input_len 128] [--output_len 128] [--num_requests 8000]
//       [--max_batch_size 1024] [--max_num_tokens 8192]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>

#include <unistd.h>

#include "common/flags.h"
#include "executor/executor_impl.h"
#include "model/engine_config.h"
#include "random_bench_engine.h"
#include "table.h"

namespace inflight::bench {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::int64_t input_len = 128, output_len = 128, num_requests = 8000;
  RandomEngineOptions engine;
};

// Device sampling without a device: the token after position p is p mod vocab (never an end id:
// the requests set none), with log-probability -1.
class InstantRunner final : public model::ModelRunner {
 public:
  InstantRunner(model::EngineConfig config, std::int64_t blocks)
      : config_(std::move(config)), blocks_(blocks) {}
  const model::EngineConfig& config() const override { return config_; }
  std::int64_t num_kv_blocks() const override { return blocks_; }
  const char* device_name() const override { return "instant"; }
  std::int64_t memory_bytes() const override { return 0; }
  bool supports_device_sampling() const override { return true; }

  Result<model::StepOutput> Step(const model::StepInput& input) override {
    model::StepOutput out;
    out.vocab_size = config_.vocab_size;
    const std::size_t n = input.sequences.size();
    out.row_begin.assign(n, 0);
    out.sampled_tokens.assign(n, -1);
    out.sampled_log_probs.assign(n, std::nanf(""));
    for (std::size_t i = 0; i < n; ++i) {
      const model::SequenceStep& s = input.sequences[i];
      if (s.logits != model::SequenceStep::Logits::kNone) {
        return Internal(
            "sequence " + std::to_string(s.seq_id) +
            " asks for logits rows: the bench's requests are all sampled on the device");
      }
      if (!s.device_sampling) continue;
      const std::int64_t position = s.num_cached + static_cast<std::int64_t>(s.tokens.size());
      out.sampled_tokens[i] = static_cast<TokenIdType>(position % config_.vocab_size);
      out.sampled_log_probs[i] = -1.0f;
    }
    steps_.fetch_add(1);
    sequence_steps_.fetch_add(static_cast<std::int64_t>(n));
    return out;
  }

  std::int64_t steps() const { return steps_.load(); }
  std::int64_t sequence_steps() const { return sequence_steps_.load(); }

 private:
  model::EngineConfig config_;
  std::int64_t blocks_;
  std::atomic<std::int64_t> steps_{0}, sequence_steps_{0};
};

Status Run(const Options& opt) {
  const fs::path work =
      fs::temp_directory_path() / ("inflight-host-bench-" + std::to_string(::getpid()));
  ASSIGN_OR_RETURN(
      const std::string engine_dir,
      WriteRandomBenchEngine(opt.engine, static_cast<std::int32_t>(opt.input_len),
                             static_cast<std::int32_t>(opt.input_len + opt.output_len), work));
  ASSIGN_OR_RETURN(model::EngineConfig cfg, model::LoadEngineConfig(engine_dir));
  fs::remove_all(work);
  const std::int64_t tpb = cfg.build.tokens_per_block;
  const std::int64_t blocks =
      cfg.build.max_batch_size * ((opt.input_len + opt.output_len + tpb - 1) / tpb + 1);
  auto runner = std::make_unique<InstantRunner>(cfg, blocks);
  InstantRunner* counts = runner.get();
  ASSIGN_OR_RETURN(auto ex, Executor::Impl::CreateWithRunner(ExecutorConfig{}, std::move(runner)));

  std::vector<Request> requests;
  std::mt19937 rng(7);
  for (std::int64_t i = 0; i < opt.num_requests; ++i) {
    Request r;
    r.input_token_ids.resize(static_cast<std::size_t>(opt.input_len));
    for (TokenIdType& t : r.input_token_ids) t = static_cast<TokenIdType>(rng() % cfg.vocab_size);
    r.max_tokens = static_cast<SizeType>(opt.output_len);
    r.output_config.exclude_input_from_output = true;
    requests.push_back(std::move(r));
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& id : ex->EnqueueAll(requests)) RETURN_IF_ERROR(id.status());
  std::int64_t finished = 0;
  while (finished < opt.num_requests) {
    for (const Response& r : ex->Await(std::nullopt, std::chrono::milliseconds(60000))) {
      if (r.hasError()) return r.error.value();
      if (r.isFinal()) ++finished;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ex->Shutdown();

  const auto steps = static_cast<double>(counts->steps());
  std::cout << "# The executor's host time a step (a runner that samples instantly)\n\n"
            << opt.num_requests << " requests of " << opt.input_len << "/" << opt.output_len
            << " enqueued at once, max_batch_size " << cfg.build.max_batch_size
            << ", max_num_tokens " << cfg.build.max_num_tokens << ".\n\n";
  Table t({"steps", "sequences a step", "wall s", "host us a step", "host ns a sequence-step"});
  t.AddRow({std::to_string(counts->steps()),
            Fmt(static_cast<double>(counts->sequence_steps()) / steps, 1), Fmt(seconds, 2),
            Fmt(seconds * 1e6 / steps, 1),
            Fmt(seconds * 1e9 / static_cast<double>(counts->sequence_steps()), 1)});
  t.Print(std::cout);
  return Status::Ok();
}

}  // namespace
}  // namespace inflight::bench

int main(int argc, char** argv) {
  namespace tools = inflight::tools;
  inflight::bench::Options opt;
  opt.engine.max_batch_size = 1024;
  tools::FlagSet flags("inflight-bench-executor-host",
                       "The executor's host time a step, against a runner that samples instantly.");
  const auto length = [](const char* name, std::int64_t* dst) {
    return [name, dst](const std::string& v) {
      return tools::ParseInt(std::string("--") + name, v, 1, 1 << 20, dst);
    };
  };
  flags.Add("input_len", "N", "prompt tokens (default 128)", length("input_len", &opt.input_len));
  flags.Add("output_len", "N", "output tokens (default 128)",
            length("output_len", &opt.output_len));
  flags.Add("num_requests", "N", "requests enqueued at once (default 8000)",
            length("num_requests", &opt.num_requests));
  inflight::bench::AddRandomEngineFlags(&flags, &opt.engine);
  return flags.ParseAndRun(argc, argv, [&] { return inflight::bench::Run(opt); });
}
