// Lookahead on the CUDA runner of one process (ModelRunner::supports_lookahead): a step launched
// while the step before is in flight, its decode tokens read on the device from that step's
// samples (SequenceStep::previous_step_row), gives what the same step gives with those tokens
// written out after the step before completed (on a runner with INFLIGHT_CUDA_LOOKAHEAD=0, which
// runs each step whole in Launch). The steps cover the eager forward pass (mixed steps, with host
// logits, a new prompt and a row the device cannot sample: every token banned) and the decode
// graphs (first use, then replay), patched from either's samples; once more with graphs off. Also
// the refusals (row past the step before, row without device sampling, a runner without
// lookahead, a third step in flight, Step with a step in flight), after which the runner goes on;
// and, for information, a decode loop's step time with and without lookahead. Main build only;
// skipped without a device.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "model/cuda_model_runner.h"
#include "sampling_test_engine.h"

namespace inflight::gpu_test {
namespace {

using model::SequenceStep;
using model::StepInput;
using model::StepOutput;

constexpr std::int64_t kVocab = 1111;
constexpr int kBlocksPerSeq = 8, kTokensPerBlock = 16, kNumSeqs = 12;

std::string MakeEngine() {
  return MakeSamplingTestEngine("inflight_gpu_lookahead", kVocab);  // 16-token blocks
}

// `lookahead`: INFLIGHT_CUDA_LOOKAHEAD (read when the runner is created).
std::unique_ptr<model::ModelRunner> MakeRunner(const std::string& engine, bool lookahead) {
  if (lookahead) {
    unsetenv("INFLIGHT_CUDA_LOOKAHEAD");
  } else {
    setenv("INFLIGHT_CUDA_LOOKAHEAD", "0", 1);
  }
  model::CudaRunnerOptions o;
  o.max_kv_tokens = std::int64_t{kNumSeqs} * kBlocksPerSeq * kTokensPerBlock;
  auto r = model::CreateCudaModelRunner(engine, o);
  unsetenv("INFLIGHT_CUDA_LOOKAHEAD");
  GPU_CHECK(r.ok(), r.status().ToString());
  GPU_CHECK(
      (*r)->supports_lookahead() == lookahead,
      std::string("supports_lookahead() is ") + ((*r)->supports_lookahead() ? "true" : "false"));
  GPU_CHECK((*r)->max_steps_in_flight() == 1, "max_steps_in_flight() is not 1");
  return std::move(r).value();
}

// What every run shares: the sequences' prompts, blocks and sampling.
struct Sequences {
  std::vector<std::vector<std::int32_t>> prompts, blocks;
  std::vector<std::optional<model::DeviceSampling>> sampling;  // nullopt: host logits
};

// 0-3, 6, 9, 10, 11: greedy; 4, 5: seeded draws; 7: host logits; 8: every token banned, so its
// rows come back kSampledAllBanned and the next step must decode some valid id (0).
Sequences MakeSequences() {
  const int lengths[kNumSeqs] = {5, 12, 33, 3, 20, 9, 17, 11, 6, 7, 25, 1};
  std::vector<std::int32_t> all_blocks(kNumSeqs * kBlocksPerSeq);
  for (std::size_t i = 0; i < all_blocks.size(); ++i) all_blocks[i] = static_cast<std::int32_t>(i);
  std::shuffle(all_blocks.begin(), all_blocks.end(), Rng());
  std::uniform_int_distribution<int> tok(0, static_cast<int>(kVocab) - 1);
  Sequences s;
  for (int i = 0; i < kNumSeqs; ++i) {
    std::vector<std::int32_t> prompt;
    for (int t = 0; t < lengths[i]; ++t) prompt.push_back(tok(Rng()));
    s.prompts.push_back(prompt);
    s.blocks.emplace_back(all_blocks.begin() + i * kBlocksPerSeq,
                          all_blocks.begin() + (i + 1) * kBlocksPerSeq);
    model::DeviceSampling d;
    d.greedy = true;
    if (i == 4 || i == 5) {
      d.greedy = false;
      d.temperature = 0.8f;
      d.top_k = i == 4 ? 40 : 0;
      d.seed = Seed() + static_cast<std::uint64_t>(i);
    }
    if (i == 8) {
      for (std::int32_t t = 0; t < kVocab; ++t) d.banned_tokens.push_back(t);
    }
    s.sampling.push_back(i == 7 ? std::nullopt : std::optional<model::DeviceSampling>(d));
  }
  return s;
}

// A step: its decodes (first, as the scheduler puts them), then its prompts.
struct Plan {
  std::vector<int> decodes, prompts;
};

// P0: prompts; A, B: mixed (eager); C: all-decode, device-sampled (a graph's first use: run, then
// captured); D: the same bucket (replayed); E: mixed again, from the graph's samples; F, G, H: the
// graph again.
std::vector<Plan> Plans() {
  return {
      {{}, {0, 1, 2, 3, 4, 5}},
      {{0, 1, 2, 3, 4, 5}, {6, 7, 8}},
      {{0, 1, 2, 3, 4, 5, 6, 7, 8}, {9}},
      {{0, 1, 2, 3, 4, 5, 6, 8, 9}, {}},
      {{0, 1, 2, 3, 4, 5, 6, 8, 9}, {}},
      {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10}},
      {{0, 1, 2, 3, 4, 5, 6, 8, 9, 10}, {}},
      {{0, 1, 2, 3, 4, 5, 6, 8, 9, 10}, {}},
      {{0, 1, 2, 3, 4, 5, 6, 8, 9, 10}, {}},
  };
}

// Builds the runs' steps in order, each sequence's cache position carried from step to step.
class StepBuilder {
 public:
  explicit StepBuilder(const Sequences& seqs)
      : seqs_(seqs), num_cached_(static_cast<std::size_t>(kNumSeqs), 0) {}

  // Step `index` of Plans(). `previous`: the step before's output (the reference: its sampled
  // tokens written out), or null (lookahead: previous_step_row, placeholders -1).
  StepInput Build(std::size_t index, const StepOutput* previous) {
    const std::vector<Plan> plans = Plans();
    const Plan& plan = plans[index];
    StepInput in;
    const auto add = [&](int seq, std::vector<std::int32_t> tokens) {
      SequenceStep s;
      s.seq_id = seq;
      s.tokens = std::move(tokens);
      s.num_cached = num_cached_[static_cast<std::size_t>(seq)];
      s.block_table = seqs_.blocks[static_cast<std::size_t>(seq)];
      const auto& d = seqs_.sampling[static_cast<std::size_t>(seq)];
      if (d) {
        s.device_sampling = *d;
        s.device_sampling->draw_index = index;
        s.logits = SequenceStep::Logits::kNone;
      }
      num_cached_[static_cast<std::size_t>(seq)] += static_cast<std::int32_t>(s.tokens.size());
      in.sequences.push_back(std::move(s));
    };
    for (const int seq : plan.decodes) {
      if (!seqs_.sampling[static_cast<std::size_t>(seq)]) {
        // Host logits: some token the host chose, the same in every run.
        add(seq, {static_cast<std::int32_t>((index * 131 + static_cast<std::size_t>(seq) * 17) %
                                            kVocab)});
        continue;
      }
      const std::int32_t row = RowIn(plans[index - 1], seq);
      GPU_CHECK(row >= 0, "sequence " + std::to_string(seq) + " is not in the step before");
      if (previous == nullptr) {
        add(seq, {-1});
        in.sequences.back().previous_step_row = row;
      } else {
        // What the runner decodes for a row it could not sample: 0.
        const std::int32_t t = previous->sampled_tokens.at(static_cast<std::size_t>(row));
        add(seq, {t >= 0 && t < kVocab ? t : 0});
      }
    }
    for (const int seq : plan.prompts) add(seq, seqs_.prompts[static_cast<std::size_t>(seq)]);
    return in;
  }

  static std::int32_t RowIn(const Plan& plan, int seq) {
    std::int32_t row = 0;
    for (const auto* part : {&plan.decodes, &plan.prompts}) {
      for (const int s : *part) {
        if (s == seq) return row;
        ++row;
      }
    }
    return -1;
  }

 private:
  const Sequences& seqs_;
  std::vector<std::int32_t> num_cached_;
};

// The reference: each step whole, its tokens from the one before once that one is back.
std::vector<StepOutput> RunReference(const std::string& engine, const Sequences& seqs) {
  auto runner = MakeRunner(engine, /*lookahead=*/false);
  StepBuilder builder(seqs);
  std::vector<StepOutput> outs;
  for (std::size_t i = 0; i < Plans().size(); ++i) {
    auto out = runner->Step(builder.Build(i, outs.empty() ? nullptr : &outs.back()));
    GPU_CHECK(out.ok(), "reference step " + std::to_string(i) + ": " + out.status().ToString());
    outs.push_back(std::move(out).value());
  }
  // A runner without lookahead refuses previous_step_row.
  StepInput next = builder.Build(Plans().size() - 1, nullptr);
  const Status refused = runner->Launch(next);
  if (refused.ok() || refused.message().find("no lookahead") == std::string::npos) {
    Fail("a runner without lookahead took previous_step_row: " + refused.ToString());
  }
  return outs;
}

void ExpectRefused(model::ModelRunner& runner, const StepInput& in, const std::string& expect) {
  const Status st = runner.Launch(in);
  if (st.ok() || st.message().find(expect) == std::string::npos) {
    Fail("expected a refusal with \"" + expect + "\", got: " + st.ToString());
  }
}

// The same steps with lookahead, launched and completed in this order (L: launch, C: complete):
//   L P0, C P0, L A, (Step, refused), L B, C A, C B, L C (its step before already completed), L D,
//   (a third launch, refused), C C, L E, C D, C E, (refusals against E), L F, C F, L G, L H, C G, C
//   H
std::vector<StepOutput> RunLookahead(const std::string& engine, const Sequences& seqs) {
  auto runner = MakeRunner(engine, /*lookahead=*/true);
  StepBuilder builder(seqs);
  std::map<std::size_t, StepOutput> outs;
  std::size_t launched = 0, completed = 0;
  const auto launch = [&] {
    const Status st = runner->Launch(builder.Build(launched, nullptr));
    GPU_CHECK(st.ok(), "lookahead launch " + std::to_string(launched) + ": " + st.ToString());
    ++launched;
  };
  const auto complete = [&] {
    auto out = runner->Complete();
    GPU_CHECK(out.ok(),
              "lookahead complete " + std::to_string(completed) + ": " + out.status().ToString());
    outs[completed++] = std::move(out).value();
  };
  launch();
  complete();
  launch();
  {
    // Step (Launch, then Complete of the oldest) with a step in flight would return that one.
    StepBuilder copy = builder;
    const auto stepped = runner->Step(copy.Build(launched, nullptr));
    if (stepped.ok() || stepped.status().message().find("in flight") == std::string::npos) {
      Fail("Step with a step in flight was not refused: " + stepped.status().ToString());
    }
  }
  launch();
  complete();
  complete();
  launch();
  launch();
  {
    // A third step in flight is refused before anything is queued; D stays the step before.
    StepBuilder copy = builder;
    ExpectRefused(*runner, copy.Build(launched, nullptr), "in flight");
  }
  complete();
  launch();
  complete();
  complete();
  {
    // Refusals against E (completed): each before anything is queued, E stays the step before.
    StepBuilder copy = builder;
    StepInput bad = copy.Build(launched, nullptr);
    const std::int32_t host_row = StepBuilder::RowIn(Plans()[launched - 1], 7);
    bad.sequences[0].previous_step_row = 11;
    ExpectRefused(*runner, bad,
                  "previous_step_row 11 of sequence 0 (seq_id 0): the step launched "
                  "before had 11 sequences");
    bad.sequences[0].previous_step_row = host_row;
    ExpectRefused(*runner, bad,
                  "sequence " + std::to_string(host_row) +
                      " of the step launched before had no device_sampling");
    bad.sequences[0].previous_step_row = 0;
    bad.sequences[0].tokens = {-1, -1};
    ExpectRefused(*runner, bad, "previous_step_row is 0 with 2 tokens");
  }
  launch();
  complete();
  launch();
  // Step H launched while G computes: the host's time in Launch, against G's device time (for
  // information: on this small model the two are alike).
  const auto start = std::chrono::steady_clock::now();
  launch();
  const double launch_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  complete();
  complete();
  std::printf(
      "  lookahead: step H launched in %.3f ms while step G was in flight (G: device %.3f "
      "ms, Complete waited %.3f ms)\n",
      launch_ms, outs[7].device_ms, outs[7].device_wait_ms);
  std::vector<StepOutput> v;
  for (auto& [i, out] : outs) v.push_back(std::move(out));
  return v;
}

void Compare(const std::string& what, const std::vector<StepOutput>& got,
             const std::vector<StepOutput>& want) {
  GPU_CHECK(got.size() == want.size(), what + ": step counts differ");
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::string step = what + " step " + std::to_string(i);
    const StepOutput& g = got[i];
    const StepOutput& w = want[i];
    if (g.sampled_tokens != w.sampled_tokens) {
      for (std::size_t r = 0; r < std::min(g.sampled_tokens.size(), w.sampled_tokens.size()); ++r) {
        if (g.sampled_tokens[r] != w.sampled_tokens[r]) {
          Fail(step + ": row " + std::to_string(r) + " sampled " +
               std::to_string(g.sampled_tokens[r]) + ", expected " +
               std::to_string(w.sampled_tokens[r]) + " (seed " + std::to_string(Seed()) + ")");
        }
      }
      if (g.sampled_tokens.size() != w.sampled_tokens.size()) Fail(step + ": row counts differ");
      continue;
    }
    for (std::size_t r = 0; r < g.sampled_log_probs.size(); ++r) {
      const float a = g.sampled_log_probs[r], b = w.sampled_log_probs[r];
      if (std::isnan(a) != std::isnan(b) || (!std::isnan(a) && std::fabs(a - b) > 1e-5f)) {
        Fail(step + ": row " + std::to_string(r) + " log-prob " + std::to_string(a) +
             ", expected " + std::to_string(b));
      }
    }
    if (g.row_begin != w.row_begin) Fail(step + ": row_begin differs");
    float scale = 0.0f;
    for (const float x : w.logits) scale = std::max(scale, std::fabs(x));
    ExpectClose(step + " host logits", g.logits, w.logits, 1e-5f * scale, 0.0f);
  }
  // The error row: step A's sequence 8 (every token banned), which B decoded as token 0.
  const std::int32_t banned = StepBuilder::RowIn(Plans()[1], 8);
  if (want[1].sampled_tokens.at(static_cast<std::size_t>(banned)) !=
      StepOutput::kSampledAllBanned) {
    Fail(what + ": step A's all-banned row sampled " +
         std::to_string(want[1].sampled_tokens[static_cast<std::size_t>(banned)]));
  }
}

GPU_TEST(LookaheadMatchesStepsOneAtATime) {
  const std::string engine = MakeEngine();
  const Sequences seqs = MakeSequences();
  for (const bool graphs : {true, false}) {
    if (graphs) {
      unsetenv("INFLIGHT_CUDA_GRAPHS");
    } else {
      setenv("INFLIGHT_CUDA_GRAPHS", "0", 1);
    }
    const std::string what = graphs ? "graphs" : "eager";
    const std::vector<StepOutput> want = RunReference(engine, seqs);
    const std::vector<StepOutput> got = RunLookahead(engine, seqs);
    Compare("lookahead " + what, got, want);
  }
  unsetenv("INFLIGHT_CUDA_GRAPHS");
}

// For information, not checked: the wall time a decode step takes in a loop of `kSteps` greedy
// all-decode steps of `batch` sequences, one at a time (Step, the token written out) against
// lookahead (Launch k + 1, then Complete k). On this small model the device time of a step is
// about the host's time to launch one, which is where lookahead gains most.
double DecodeLoopMs(const std::string& engine, bool lookahead, int batch) {
  constexpr int kSteps = 64;
  auto runner = MakeRunner(engine, lookahead);
  StepInput step;
  for (int i = 0; i < batch; ++i) {
    SequenceStep s;
    s.seq_id = i;
    s.tokens = {static_cast<std::int32_t>(7 * i + 1), 5, 9};
    for (int b = 0; b < kBlocksPerSeq; ++b) s.block_table.push_back(i * kBlocksPerSeq + b);
    s.device_sampling = model::DeviceSampling{};
    s.device_sampling->greedy = true;
    s.logits = SequenceStep::Logits::kNone;
    step.sequences.push_back(s);
  }
  auto first = runner->Step(step);
  GPU_CHECK(first.ok(), first.status().ToString());
  StepOutput last = std::move(first).value();
  const auto next = [&](bool from_device) {
    for (std::size_t i = 0; i < step.sequences.size(); ++i) {
      SequenceStep& s = step.sequences[i];
      s.num_cached += static_cast<std::int32_t>(s.tokens.size());
      s.tokens = {from_device ? -1 : std::max(0, last.sampled_tokens[i])};
      s.previous_step_row = from_device ? static_cast<std::int32_t>(i) : -1;
    }
  };
  const auto start = std::chrono::steady_clock::now();
  if (lookahead) {
    next(true);
    GPU_CHECK(runner->Launch(step).ok(), "launch");
    for (int k = 1; k < kSteps; ++k) {
      next(true);
      GPU_CHECK(runner->Launch(step).ok(), "launch");
      GPU_CHECK(runner->Complete().ok(), "complete");
    }
    GPU_CHECK(runner->Complete().ok(), "complete");
  } else {
    for (int k = 0; k < kSteps; ++k) {
      next(false);
      auto out = runner->Step(step);
      GPU_CHECK(out.ok(), out.status().ToString());
      last = std::move(out).value();
    }
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() /
         kSteps;
}

GPU_TEST(LookaheadDecodeLoopTimes) {
  const std::string engine = MakeEngine();
  for (const bool graphs : {true, false}) {
    if (graphs) {
      unsetenv("INFLIGHT_CUDA_GRAPHS");
    } else {
      setenv("INFLIGHT_CUDA_GRAPHS", "0", 1);
    }
    for (const int batch : {1, 8}) {
      DecodeLoopMs(engine, false, batch);  // warm-up: the graphs' capture, cuBLASLt's plans
      const double one = DecodeLoopMs(engine, false, batch);
      DecodeLoopMs(engine, true, batch);
      const double ahead = DecodeLoopMs(engine, true, batch);
      std::printf(
          "  decode loop, %s, batch %d: %.3f ms a step one at a time, %.3f ms with "
          "lookahead\n",
          graphs ? "graphs" : "eager", batch, one, ahead);
    }
  }
  unsetenv("INFLIGHT_CUDA_GRAPHS");
}

}  // namespace
}  // namespace inflight::gpu_test
