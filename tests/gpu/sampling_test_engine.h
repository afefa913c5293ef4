// The small bf16 Llama engine the GPU sampling tests build (executor_device_sampling_test,
// cuda_lookahead_test): random weights spread so that sampling has real choices, a vocabulary the
// caller picks (odd and large, so a host logits row costs something), 16-token KV blocks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "gpu_test_util.h"
#include "model/checkpoint_converter.h"
#include "model/random_checkpoint.h"

namespace inflight::gpu_test {

// Writes the checkpoint and builds the engine under the temp folder's `name`_<seed>; returns the
// engine folder.
inline std::string MakeSamplingTestEngine(const std::string& name, std::int64_t vocab) {
  const auto root = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(Seed()));
  model::RandomCheckpointOptions ck;
  ck.arch = "llama";
  ck.hidden_size = 256;
  ck.num_layers = 2;
  ck.num_heads = 4;
  ck.num_kv_heads = 2;
  ck.head_dim = 64;
  ck.intermediate_size = 512;
  ck.vocab_size = vocab;
  ck.max_position_embeddings = 512;
  ck.dtype = DType::kBFloat16;
  ck.seed = Seed();
  ck.init_std = 0.1;  // logits spread over a few units: sampling has real choices
  auto written = model::WriteRandomCheckpoint(ck, (root / "hf").string());
  GPU_CHECK(written.ok(), written.status().ToString());
  model::BuildOptions b;
  b.checkpoint_dir = (root / "hf").string();
  b.output_dir = (root / "engine").string();
  b.dtype = DType::kBFloat16;
  b.max_batch_size = 16;
  b.max_input_len = 64;
  b.max_seq_len = 256;
  b.max_num_tokens = 512;
  b.tokens_per_block = 16;
  auto built = model::BuildEngine(b);
  GPU_CHECK(built.ok(), built.status().ToString());
  return b.output_dir;
}

}  // namespace inflight::gpu_test
