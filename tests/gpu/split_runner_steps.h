// The steps the CUDA runner's split-engine tests run, over NCCL with one process per GPU
// (gpu_nccl_collectives_test) or over threads sharing one GPU (gpu_split_one_device_test).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <vector>

#include "model/model_runner.h"

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

}  // namespace inflight::model::testing
