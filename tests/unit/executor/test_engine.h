// Builds a tiny random-weight engine in a temporary folder, once per test binary.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "model/checkpoint_converter.h"
#include "model/random_checkpoint.h"

namespace inflight::testing {

struct TinyEngineOptions {
  std::string arch = "llama";
  std::int32_t tokens_per_block = 4;
  std::int32_t max_batch_size = 16;
  std::int32_t max_num_tokens = 256;
  std::int32_t max_input_len = 96;
  std::int32_t max_seq_len = 128;
  std::int64_t vocab_size = 97;
  std::uint64_t seed = 11;
  std::optional<std::int64_t> sliding_window;  // the checkpoint's (mistral: every layer)
};

// Returns the engine folder (built on first use for these options).
inline std::string TinyEngine(const TinyEngineOptions& o, const std::string& tag) {
  namespace fs = std::filesystem;
  const fs::path root =
      fs::temp_directory_path() / ("inflight_test_" + std::to_string(::getpid()) + "_" + tag);
  const fs::path ckpt = root / "ckpt", engine = root / "engine";
  if (fs::exists(engine / "config.json")) return engine.string();
  model::RandomCheckpointOptions c;
  c.arch = o.arch;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = o.arch == "gpt2" ? 4 : 2;
  c.intermediate_size = 64;
  c.vocab_size = o.vocab_size;
  c.max_position_embeddings = 256;
  c.seed = o.seed;
  c.init_std = 0.5;  // large weights: sharp distributions, so greedy ties are unlikely
  c.sliding_window = o.sliding_window;
  auto written = model::WriteRandomCheckpoint(c, ckpt.string());
  if (!written.ok()) return "error: " + written.status().ToString();
  model::BuildOptions b;
  b.checkpoint_dir = ckpt.string();
  b.output_dir = engine.string();
  b.dtype = DType::kFloat32;
  b.max_batch_size = o.max_batch_size;
  b.max_input_len = o.max_input_len;
  b.max_seq_len = o.max_seq_len;
  b.max_num_tokens = o.max_num_tokens;
  b.tokens_per_block = o.tokens_per_block;
  auto built = model::BuildEngine(b);
  if (!built.ok()) return "error: " + built.status().ToString();
  return engine.string();
}

}  // namespace inflight::testing
