// The steps the CUDA runner's split-engine tests run, over NCCL with one process per GPU
// (gpu_nccl_collectives_test) or over threads sharing one GPU (gpu_split_one_device_test).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/cuda_model_runner.h"
#include "model/model_runner.h"
#include "unit/model_cpu/test_engine.h"

namespace inflight::model::testing {

// A prompt of prompt_len random tokens, then two decode steps, over block_table.
inline std::vector<StepInput> RandomSteps(std::uint64_t seed, int prompt_len,
                                          const std::vector<std::int32_t>& block_table) {
  std::vector<StepInput> steps(3);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    SequenceStep s;
    const int len = i == 0 ? prompt_len : 1;
    for (int t = 0; t < len; ++t) s.tokens.push_back(static_cast<TokenIdType>(rng() % 1031));
    s.num_cached = i == 0 ? 0 : prompt_len - 1 + static_cast<std::int32_t>(i);
    s.block_table = block_table;
    steps[i].sequences.push_back(s);
  }
  return steps;
}

// Greedy generation of several sequences, each step one sequence (one micro-batch), kept in flight
// as the executor keeps them: up to max_in_flight launched before the oldest is completed, a
// sequence's next step launched only once its previous one is back. Even sequences sample on the
// device (their decode steps replay graphs), odd ones take the argmax of their logits on the host.
// Every rank makes the same calls: rank 0 (`answers`) picks each token, and `share` hands it from
// rank 0 to every rank (a broadcast: each rank passes its token, rank 0's comes back). Returns, on
// rank 0, each sequence's generated tokens.
inline std::vector<std::vector<TokenIdType>> Generate(
    ModelRunner& runner, std::size_t max_in_flight, int num_seqs, int num_new, bool answers,
    const std::function<TokenIdType(TokenIdType)>& share) {
  struct Seq {
    std::vector<TokenIdType> tokens;
    std::int32_t num_cached = 0;
    std::vector<TokenIdType> generated;
  };
  std::vector<Seq> seqs(static_cast<std::size_t>(num_seqs));
  std::mt19937_64 rng(17);
  for (int s = 0; s < num_seqs; ++s) {
    for (int t = 0; t < 5 + 2 * s; ++t) {
      seqs[static_cast<std::size_t>(s)].tokens.push_back(static_cast<TokenIdType>(rng() % 1031));
    }
  }
  const auto step_for = [&](int s) {
    const Seq& q = seqs[static_cast<std::size_t>(s)];
    SequenceStep st;
    st.seq_id = s;
    st.tokens.assign(q.tokens.begin() + q.num_cached, q.tokens.end());
    st.num_cached = q.num_cached;
    // Four blocks of 4 tokens per sequence, interleaved and out of order across sequences.
    for (int b = 0; b < 4; ++b) st.block_table.push_back((3 - b) * num_seqs + s);
    if (s % 2 == 0) {
      st.logits = SequenceStep::Logits::kNone;
      st.device_sampling = DeviceSampling{};
      st.device_sampling->greedy = true;
    }
    StepInput in;
    in.sequences.push_back(std::move(st));
    return in;
  };
  std::deque<int> ready, in_flight;
  for (int s = 0; s < num_seqs; ++s) ready.push_back(s);
  while (!ready.empty() || !in_flight.empty()) {
    while (in_flight.size() < max_in_flight && !ready.empty()) {
      const int s = ready.front();
      ready.pop_front();
      const Status launched = runner.Launch(step_for(s));
      EXPECT_TRUE(launched.ok()) << launched.ToString();
      if (!launched.ok()) return {};
      in_flight.push_back(s);
    }
    const int s = in_flight.front();
    in_flight.pop_front();
    Seq& q = seqs[static_cast<std::size_t>(s)];
    auto out = runner.Complete();
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) return {};
    TokenIdType token = -1;
    if (answers && s % 2 == 0) {
      EXPECT_EQ(out->sampled_tokens.size(), 1u);
      if (!out->sampled_tokens.empty()) token = out->sampled_tokens[0];
    } else if (answers) {
      EXPECT_EQ(out->logits.size(), static_cast<std::size_t>(out->vocab_size));
      if (!out->logits.empty()) {
        token = static_cast<TokenIdType>(std::max_element(out->logits.begin(), out->logits.end()) -
                                         out->logits.begin());
      }
    }
    token = share(token);
    q.num_cached = static_cast<std::int32_t>(q.tokens.size());
    q.tokens.push_back(token);
    q.generated.push_back(token);
    if (static_cast<int>(q.generated.size()) < num_new) ready.push_back(s);
  }
  std::vector<std::vector<TokenIdType>> generated;
  generated.reserve(seqs.size());
  for (const Seq& q : seqs) generated.push_back(q.generated);
  return generated;
}

// The logits of each step of `steps` on `runner` (every rank of a group makes the same calls);
// stops at a failed step, which fails the test.
inline std::vector<std::vector<float>> StepLogits(ModelRunner& runner,
                                                  const std::vector<StepInput>& steps,
                                                  const std::string& name) {
  std::vector<std::vector<float>> logits;
  for (const StepInput& step : steps) {
    auto out = runner.Step(step);
    EXPECT_TRUE(out.ok()) << name << ": " << out.status().ToString();
    if (!out.ok()) break;
    logits.push_back(std::move(out->logits));
  }
  return logits;
}

// The whole engine's logits of each step, on the CPU runner and on CUDA device 0: what a split's
// logits are held to (ExpectSplitStepMatches). Empty where a runner failed, which fails the test.
struct WholeEngineLogits {
  std::vector<std::vector<float>> cpu, gpu;
};
inline WholeEngineLogits WholeLogits(const TestEngine& whole, const std::vector<StepInput>& steps,
                                     std::int64_t max_kv_tokens, const std::string& name) {
  WholeEngineLogits w;
  if (auto cpu = whole.Runner(max_kv_tokens)) w.cpu = StepLogits(*cpu, steps, name + " on the CPU");
  CudaRunnerOptions o;
  o.max_kv_tokens = max_kv_tokens;
  auto gpu = CreateCudaModelRunner(whole.engine_dir(), o);
  EXPECT_TRUE(gpu.ok()) << name << ": " << gpu.status().ToString();
  if (gpu.ok()) w.gpu = StepLogits(**gpu, steps, name + " whole on one GPU");
  return w;
}

// One step's logits of an engine split at tp x pp (`split`, rank 0's) against the same engine
// whole on the same GPU (`gpu_whole`) and on the CPU runner (`cpu`). Pipeline stages alone (tp 1)
// run the whole engine's kernels on the same rows in the same order, so their logits equal the
// whole engine's on the GPU bit for bit. Tensor-parallel ranks sum partial products in another
// order (and an FP8 rank takes its activation scales from its own slice), so theirs are held to
// the CPU's: within 0.05 of the largest logit, or for FP8 (whose activation codes move by a step
// where the GPU's bf16 input lies near a rounding boundary: the whole engine on the GPU is itself
// ~0.1 from the CPU) within 1.5 x the whole GPU engine's error. Prints the three distances.
inline void ExpectSplitStepMatches(const std::string& name, std::size_t step,
                                   const std::vector<float>& split,
                                   const std::vector<float>& gpu_whole,
                                   const std::vector<float>& cpu, int tp, bool fp8) {
  ASSERT_EQ(split.size(), cpu.size()) << name << " step " << step;
  ASSERT_EQ(gpu_whole.size(), cpu.size()) << name << " step " << step;
  const double split_error = NormalisedError(split.data(), cpu.data(), cpu.size());
  const double whole_error = NormalisedError(gpu_whole.data(), cpu.data(), cpu.size());
  double to_whole = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    to_whole = std::max(to_whole, std::fabs(double{split[i]} - gpu_whole[i]));
  }
  std::printf(
      "%s step %zu: against the CPU %.4f (the whole engine on the GPU %.4f); largest "
      "difference from the whole engine on the GPU %.3g\n",
      name.c_str(), step, split_error, whole_error, to_whole);
  if (tp == 1) {
    EXPECT_EQ(to_whole, 0.0) << name << " step " << step;
  }
  EXPECT_LT(split_error, fp8 ? std::max(0.05, 1.5 * whole_error) : 0.05)
      << name << " step " << step << " (the whole engine on the GPU: " << whole_error << ")";
}

}  // namespace inflight::model::testing
