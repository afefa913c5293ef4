// What the tests of quantized engines do with an engine on the CPU runner: build one from a
// fixture checkpoint at the tests' small sizes, take its logits over a fixed prompt, compare them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/checkpoint_converter.h"
#include "model/cpu_model_runner.h"

namespace inflight::model::testing {

// The engine of `ckpt` in fp32, max_seq_len 64, 4 tokens a block; "" or the error.
inline std::string Build(const std::string& ckpt, const std::string& out, BuildOptions o = {}) {
  o.checkpoint_dir = ckpt;
  o.output_dir = out;
  o.dtype = DType::kFloat32;
  o.max_seq_len = 64;
  o.tokens_per_block = 4;
  auto built = BuildEngine(o);
  return built.ok() ? "" : built.status().ToString();
}

// Logits of every row of a 10-token prompt, then of 5 more tokens over the cached 10.
inline std::vector<float> Logits(const std::string& engine) {
  RunnerOptions ro;
  ro.max_kv_tokens = 64;
  ro.num_threads = 1;
  auto runner = CreateCpuModelRunner(engine, ro);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  if (!runner.ok()) return {};
  std::vector<float> all;
  SequenceStep s;
  s.block_table = {3, 0, 2, 1};
  s.logits = SequenceStep::Logits::kAll;
  for (int step = 0; step < 2; ++step) {
    s.num_cached = step == 0 ? 0 : 10;
    s.tokens.clear();
    for (int t = 0; t < (step == 0 ? 10 : 5); ++t)
      s.tokens.push_back((7 * (t + 10 * step) + 3) % 97);
    auto out = (*runner)->Step(StepInput{{s}});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (out.ok()) all.insert(all.end(), out->logits.begin(), out->logits.end());
  }
  return all;
}

// max |a - b| over max |b|; infinite when a difference is NaN.
inline double MaxRelError(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, ref = 1e-30;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
    err = std::isnan(e) ? INFINITY : std::max(err, e);
    ref = std::max(ref, std::fabs(static_cast<double>(b[i])));
  }
  return err / ref;
}

}  // namespace inflight::model::testing
