// The small checkpoint the split-engine tests run under mpirun (the runner's and the
// calibration's).
#pragma once

#include <string>

#include "model/random_checkpoint.h"

namespace inflight::model::testing {

// Vocabulary of the split test models: not a multiple of the ranks, so vocabulary slices are
// uneven.
inline constexpr std::int64_t kSplitTestVocab = 1031;

// The demo model's shape (tools/prepare_demo.sh: GPT-2, hidden 256, 4 layers of 4 heads, MLP 1024)
// with a smaller vocabulary; "llama" the same with 2 kv heads (replicated at tp 4 and 8).
// "llama8": 8 heads of 32, for tp 8.
inline RandomCheckpointOptions SplitTestModel(const std::string& name) {
  const std::string arch = name == "llama8" ? "llama" : name;
  RandomCheckpointOptions o;
  o.arch = arch;
  o.hidden_size = 256;
  o.num_layers = 4;
  o.num_heads = name == "llama8" ? 8 : 4;
  o.num_kv_heads = arch == "gpt2" ? 4 : 2;
  o.intermediate_size = arch == "gpt2" ? 1024 : 512;
  o.vocab_size = kSplitTestVocab;
  o.max_position_embeddings = 64;
  o.init_std = 0.1;
  o.seed = 17;
  return o;
}

}  // namespace inflight::model::testing
