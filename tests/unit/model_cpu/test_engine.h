// Engines for the runner tests: a random Hugging Face checkpoint (the model-I/O generator)
// converted by the builder into a temporary engine directory that is removed at scope exit.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "model/checkpoint_converter.h"
#include "model/cpu_model_runner.h"
#include "model/random_checkpoint.h"

namespace inflight::model::testing {

class TestEngine {
 public:
  // Writes the checkpoint and builds an engine of `dtype` with `tokens_per_block`, split over
  // `tp_size` tensor-parallel ranks and `pp_size` pipeline stages; `adjust` may set the build's
  // other options (quantization) before it runs.
  static std::unique_ptr<TestEngine> Make(
      const RandomCheckpointOptions& options, DType dtype, std::int32_t tokens_per_block,
      std::string* error, std::int32_t tp_size = 1, std::int32_t pp_size = 1,
      const std::function<void(BuildOptions&)>& adjust = nullptr) {
    static std::atomic<int> counter{0};
    auto e = std::unique_ptr<TestEngine>(new TestEngine());
    e->root_ =
        std::filesystem::temp_directory_path() /
        ("inflight_model_cpu_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(e->root_);
    const std::string ckpt = (e->root_ / "checkpoint").string();
    auto written = WriteRandomCheckpoint(options, ckpt);
    if (!written.ok()) {
      *error = "WriteRandomCheckpoint: " + written.status().ToString();
      return nullptr;
    }
    BuildOptions b;
    b.checkpoint_dir = ckpt;
    b.output_dir = e->engine_dir();
    b.dtype = dtype;
    b.tokens_per_block = tokens_per_block;
    b.tp_size = tp_size;
    b.pp_size = pp_size;
    b.max_seq_len = static_cast<std::int32_t>(options.max_position_embeddings);
    if (adjust) adjust(b);
    auto built = BuildEngine(b);
    if (!built.ok()) {
      *error = "BuildEngine: " + built.status().ToString();
      return nullptr;
    }
    return e;
  }
  ~TestEngine() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  std::string engine_dir() const { return (root_ / "engine").string(); }
  std::string checkpoint_dir() const { return (root_ / "checkpoint").string(); }

  std::unique_ptr<ModelRunner> Runner(std::int64_t max_kv_tokens, int num_threads = 2) const {
    RunnerOptions o;
    o.max_kv_tokens = max_kv_tokens;
    o.num_threads = num_threads;
    auto r = CreateCpuModelRunner(engine_dir(), o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

 private:
  TestEngine() = default;
  std::filesystem::path root_;
};

// Largest |a - b| over the largest |b|: the normalised error the runner tests bound.
inline double NormalisedError(const float* a, const float* b, std::size_t n) {
  double max_err = 0.0, max_ref = 1e-30;
  for (std::size_t i = 0; i < n; ++i) {
    const double err = std::fabs(static_cast<double>(a[i]) - b[i]);
    max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(b[i])));
  }
  return max_err / max_ref;
}

}  // namespace inflight::model::testing
